"""Metrics 4-8 per video: our single pass against the reference code's way and against the floor.

- ours: decode once, one FaceMesh pass (tracking, refined) shared by every landmark metric,
  VAD once, the metric math.
- reference-style: what the reference scripts do per video: for each landmark metric, decode
  the video again and run a FaceMesh pass with that script's settings (lip dynamics at 256x256,
  eyebrows, silent lips at 256x256 on the silent frames, lip-sync without refinement on BGR
  frames, head pose); the audio is decoded and VAD run again for each of the two sync metrics.
- floor: decode + one FaceMesh pass, nothing else.
"""
import sys

from common import best_of, kit

from theval_mesh.backends.audio.backend import AudioBackend
from theval_mesh.backends.audio.resample import resample
from theval_mesh.backends.headpose.backend import estimate
from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.landmarks.backend import FaceTracker
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.compute import compute_metrics
from theval_mesh.core.frame_pass import run_frame_pass
from theval_mesh.pure.metrics.speech_frames import silent_frames
from theval_mesh.pure.settings import RunSettings

SETTINGS = RunSettings(single_pass=True)


def ours(path, vad):
    reader = MediaReader(path, reference_audio=True)
    series = run_frame_pass(reader, SETTINGS, quality_backend=None)
    pose = estimate(series.landmarks["single"].points, series.width, series.height)
    compute_metrics(series, pose, vad.analyse(reader.audio, SETTINGS.profile), SETTINGS)


def one_pass(path, mesh_pass, only=None):
    with FaceTracker(mesh_pass) as tracker:
        for i, frame in MediaReader(path).frames():
            if only is None or i in only:
                tracker.process(frame)


def reference_style(path, vad):
    one_pass(path, passes.LIP_DYNAMICS)
    one_pass(path, passes.SINGLE)  # head pose
    one_pass(path, passes.EYEBROW)
    for _ in range(2):  # silent-lip and lip-sync each read the audio and run the VAD
        reader = MediaReader(path)
        audio = reader.read_audio()
        speech, = vad.speech_segments(resample(audio.samples, audio.rate, 16000))
    silent = set(silent_frames(speech, reader.info.fps, int(reader.info.duration_s * reader.info.fps)).tolist())
    one_pass(path, passes.SILENT_LIP, only=silent)
    one_pass(path, passes.LIP_SYNC_REFERENCE)


def floor(path):
    one_pass(path, passes.SINGLE)


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    k = kit(n_clips=3, duration_s=6.0, size=size)
    clips = k.videos("gt")
    vad = AudioBackend()
    ours(clips[0], vad)  # warm-up: model loading is not what is measured
    t_ours = best_of(lambda: [ours(c, vad) for c in clips])
    t_ref = best_of(lambda: [reference_style(c, vad) for c in clips])
    t_floor = best_of(lambda: [floor(c) for c in clips])
    n = len(clips)
    print(f"clips: {n} x 6 s at {size}x{size}, 25 fps")
    print(f"ours (single pass):        {t_ours / n:6.2f} s/video")
    print(f"reference-style (5 passes): {t_ref / n:6.2f} s/video")
    print(f"floor (decode + 1 pass):   {t_floor / n:6.2f} s/video")
    print(f"speed-up vs reference-style: {t_ref / t_ours:.2f}x   (target >= 4x)")
    print(f"ours / floor:                {t_ours / t_floor:.2f}    (target <= 1.3)")


if __name__ == "__main__":
    main()
