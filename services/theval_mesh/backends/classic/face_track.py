"""A video's face tracks as syncnet_python's run_pipeline.py makes them: frames at 25 fps, a face
detector on every frame, tracks and 224x224 crops (pure/metrics/face_tracks.py), each track's
audio at 16 kHz mono 16-bit cut to its frames. Three ways, named in provenance (PIPELINES):

  "syncnet_python" (the default when the ffmpeg program is installed): the same ffmpeg commands
      and OpenCV writer as run_pipeline.py and SyncNetInstance.evaluate, in a temporary folder:
      the video re-encoded to 25 fps MPEG-4 at q 2 (audio to MP3, the AVI default), its frames
      written as JPEG at q 2 and read back, the audio extracted at 16 kHz; each track's crops
      written as an XVID AVI by OpenCV, its audio cut with ffmpeg; the crops extracted as JPEG
      again (ffmpeg's default quality) and read back. Every lossy step the published LSE numbers
      went through, so values compare with theirs.
  "in-process": the decoded pixels and audio, nothing re-encoded (no ffmpeg program needed).
      Faster, but NOT the published numbers' preprocessing: the JPEG and XVID steps move LSE
      (`theval robustness` measures by how much on your clips).
  "wav2lip-lrs": Rudrabha/Wav2Lip's evaluation/scores_LSE/calculate_scores_LRS.py (5c90fa9), the
      command its README gives for LRS2/LRS3/LRW: no face detection and no 25 fps re-encoding;
      SyncNetInstance_calc_scores.evaluate extracts the video's own frames as JPEG and resizes
      each WHOLE frame to 224x224 (cv2.resize), one "track" of every frame.
  "latentsync": bytedance/LatentSync's eval/eval_sync_conf.py (a229c39), its copy of run_pipeline.py
      (eval/syncnet_detect.py): the same steps as syncnet_python's, in MP4: the 25 fps re-encoding
      to video.mp4 (ffmpeg's H.264), the crops written by OpenCV as MPEG-4 Part 2 ("mp4v") and
      muxed with their audio re-encoded to AAC; tracks of more than 50 detections (min_track=50).
  "mochabench": congwei1230/MoChaBench's eval-lipsync/script/syncnet_pipeline.py (043908d), its
      SyncNetPipeline.inference with the video as its own speech: syncnet_python's AVI steps, but
      the 16 kHz speech taken straight from the input (not from the re-encoded AVI's MP3), tracks
      of more than 50 detections, its IoU's 1e-8 and its way of ending a frame's scan, and the
      crops' audio extracted with aresample=async=1.

The faces: syncnet_python's S3FD (backends/classic/s3fd.py, at its conf 0.9 and scale 0.25) when
`sfd_face.pth` is in the weights store; else MediaPipe's face detector (BlazeFace, short range,
its weights ship in the mediapipe package), named in provenance (detector_name). Either way the
video is one shot: no PySceneDetect cut detection (talking-head clips are single shots).
A video not at 25 fps: in-process takes, for each 1/25 s, the frame shown at that time; the
syncnet_python way lets ffmpeg `-r 25` drop and repeat frames by its own rounding.
"""
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.errors import UserError, VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.metrics import face_tracks as ft
from theval_mesh.pure.metrics import lse

BLAZEFACE = "MediaPipe face detection (BlazeFace short-range; syncnet_python uses S3FD)"
ONE_SHOT = "one shot"
SYNCNET_PYTHON, IN_PROCESS, WAV2LIP_LRS, LATENTSYNC, MOCHABENCH = lse.PIPELINES
FFMPEG_TIMEOUT_S = 600
MIN_CONFIDENCE = 0.5  # MediaPipe's default


@dataclass(frozen=True)
class Conversions:
    """What differs between syncnet_python's run_pipeline.py and the copies of it that LatentSync
    and MoChaBench evaluate with."""
    container: str    # of the 25 fps re-encoding and of the crops
    fourcc: str       # OpenCV's codec for the crops
    crop_audio: str   # the codec of the crops' audio when muxed ("copy": the cut PCM)
    min_track: int    # a track needs more detections than this
    speech_from_input: bool = False  # the 16 kHz speech from the input itself, not the re-encoding
    crop_audio_args: tuple = ("-async", "1")  # how the evaluation extracts a crop's audio
    iou_eps: float = 0.0
    stop_at_mismatch: bool = False  # face_tracks.tracks


CONVERSIONS = {SYNCNET_PYTHON: Conversions("avi", "XVID", "copy", ft.MIN_TRACK),
               LATENTSYNC: Conversions("mp4", "mp4v", "aac", 50),  # eval_sync_conf.py: min_track=50
               MOCHABENCH: Conversions("avi", "XVID", "copy", 50, speech_from_input=True,
                                       crop_audio_args=("-af", "aresample=async=1"), iou_eps=1e-8,
                                       stop_at_mismatch=True)}


@dataclass
class FaceTrack:
    frames: np.ndarray   # 25 fps frame indices
    crops: np.ndarray    # (T, 224, 224, 3) uint8, BGR as syncnet_python's cv2 reads them
    pcm16: np.ndarray    # the track's audio, 16 kHz mono int16


class At25fps:
    """A video's frames at 25 fps: for each 1/25 s, (index, the RGB frame shown at that time).
    audio=True: after iterating, `pcm16()` is its 16 kHz mono 16-bit track."""

    def __init__(self, path: str, limits: Limits, audio: bool = False):
        self.path = path
        self.reader = MediaReader(path, limits, syncnet_audio=audio)

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        fps = self.reader.info.fps or lse.FPS
        out = 0
        for i, rgb in self.reader.frames():
            shown_until = (i + 1) / fps  # a frame is on screen until the next one's time
            while out / lse.FPS < shown_until - 1e-9:
                yield out, rgb
                out += 1

    def pcm16(self) -> np.ndarray:
        a = self.reader.audio
        if a is None or a.problem or a.syncnet is None or not len(a.syncnet):
            reason = a.problem if a is not None and a.problem else "no audio track"
            raise VideoError(self.path, f"{reason}: LSE-C/LSE-D compare the lips with the audio")
        return np.round(a.syncnet * 32768.0).astype(np.int16)


def detector_name(s3fd=None) -> str:
    """What found the faces, for provenance: S3FD (its file) or BlazeFace; one shot either way."""
    return f"{s3fd.describe() if s3fd is not None else BLAZEFACE}; {ONE_SHOT}"


class _BlazeFace:
    def __enter__(self):
        import mediapipe as mp

        self.det = mp.solutions.face_detection.FaceDetection(model_selection=0,
                                                             min_detection_confidence=MIN_CONFIDENCE)
        return self

    def __exit__(self, *exc):
        self.det.close()

    def boxes(self, rgb: np.ndarray) -> list[tuple]:
        h, w = rgb.shape[:2]
        out = []
        for d in self.det.process(rgb).detections or ():
            b = d.location_data.relative_bounding_box
            out.append((b.xmin * w, b.ymin * h, (b.xmin + b.width) * w, (b.ymin + b.height) * h))
        return out


class _S3fd:
    def __init__(self, s3fd):
        self.s3fd = s3fd

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def boxes(self, rgb: np.ndarray) -> list[tuple]:
        # run_pipeline.py inference_video: detect_faces(image, conf_th=0.9, scales=[facedet_scale])
        return [tuple(b[:4]) for b in self.s3fd.detect_faces(rgb)]


def _detector(s3fd=None):
    """The faces in one RGB frame, (x1, y1, x2, y2) in pixels: `with _detector(s3fd) as d: d.boxes(rgb)`."""
    return _S3fd(s3fd) if s3fd is not None else _BlazeFace()


def crop(bgr: np.ndarray, s: float, y: float, x: float) -> np.ndarray:
    """crop_video's window of one frame, resized to 224x224 (cv2's default bilinear)."""
    pad, (rows, cols) = ft.crop_slices(s, y, x)
    padded = np.pad(bgr, ((pad, pad), (pad, pad), (0, 0)), "constant", constant_values=(ft.PAD_VALUE, ft.PAD_VALUE))
    return cv2.resize(padded[rows, cols], (ft.CROP_SIZE, ft.CROP_SIZE))


def face_tracks(path: str, limits: Limits = Limits(), pipeline: str = SYNCNET_PYTHON, s3fd=None) -> list[FaceTrack]:
    """The video's face tracks with their crops and audio ([] when no face stays long enough).
    s3fd: an s3fd.S3FD finding the faces (None: BlazeFace)."""
    if pipeline in CONVERSIONS:
        return _syncnet_python_tracks(path, limits, s3fd, CONVERSIONS[pipeline])
    if pipeline == WAV2LIP_LRS:
        return [_whole_frames(path, limits)]
    return _in_process_tracks(path, limits, s3fd)


def _in_process_tracks(path: str, limits: Limits, s3fd=None) -> list[FaceTrack]:
    with _detector(s3fd) as det:
        boxes = [det.boxes(rgb) for _, rgb in At25fps(path, limits)]
    tracks = ft.tracks(boxes)
    if not tracks:
        return []
    windows = [ft.crop_windows(t) for t in tracks]
    crops: list[list[np.ndarray]] = [[] for _ in tracks]
    frames = At25fps(path, limits, audio=True)
    for i, rgb in frames:
        bgr = None
        for k, t in enumerate(tracks):
            j = i - int(t.frames[0])
            if 0 <= j < len(t.frames):
                bgr = rgb[..., ::-1] if bgr is None else bgr
                crops[k].append(crop(bgr, *windows[k][j]))
    pcm = frames.pcm16()
    per_frame = lse.AUDIO_RATE // lse.FPS
    return [FaceTrack(t.frames, np.stack(c), pcm[int(t.frames[0]) * per_frame:(int(t.frames[-1]) + 1) * per_frame])
            for t, c in zip(tracks, crops, strict=True)]


def ffmpeg_program() -> str | None:
    return shutil.which("ffmpeg")


def _ffmpeg(path: str, *args) -> None:
    """One ffmpeg command of syncnet_python's (`-y` first, as theirs), bounded in time."""
    program = ffmpeg_program()
    if program is None:
        raise UserError("LSE-C/LSE-D the syncnet_python way need the ffmpeg program (apt-get install ffmpeg), "
                        "or --lse-pipeline in-process (not the published numbers' preprocessing)")
    run = subprocess.run([program, "-nostdin", "-loglevel", "error", "-y", *map(str, args)],
                         capture_output=True, text=True, timeout=FFMPEG_TIMEOUT_S)
    if run.returncode:
        raise VideoError(path, f"ffmpeg could not convert it ({run.stderr.strip()[-300:]})")


def _opencv_frame_count(video: Path) -> int:
    cap = cv2.VideoCapture(str(video))
    n = 0
    while cap.grab():
        n += 1
    cap.release()
    return n


def _jpegs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jpg"))


def _whole_frames(path: str, limits: Limits) -> FaceTrack:
    """Wav2Lip's SyncNetInstance_calc_scores.evaluate on the video itself: its ffmpeg extractions
    (the frames as JPEG at the video's own rate, 16 kHz mono audio), each frame read by OpenCV and
    resized whole to 224x224."""
    from scipy.io import wavfile

    reader = MediaReader(path, limits)  # the header's limits before ffmpeg runs; and is there audio?
    reader.close()
    if not reader.info.has_audio:
        raise VideoError(path, "no audio track: LSE-C/LSE-D compare the lips with the audio")
    with tempfile.TemporaryDirectory(prefix="theval-lse-") as tmp:
        t = Path(tmp)
        _ffmpeg(path, "-i", path, "-threads", "1", "-f", "image2", t / "%06d.jpg")
        _ffmpeg(path, "-i", path, "-async", "1", "-ac", "1", "-vn", "-acodec", "pcm_s16le",
                "-ar", str(lse.AUDIO_RATE), t / "audio.wav")
        frames = _jpegs(t)
        if not frames:
            raise VideoError(path, "ffmpeg wrote no frame")
        crops = np.stack([cv2.resize(cv2.imread(str(f)), (ft.CROP_SIZE, ft.CROP_SIZE)) for f in frames])
        _, pcm = wavfile.read(t / "audio.wav")
    return FaceTrack(np.arange(len(crops)), crops, np.asarray(pcm, np.int16))


def _syncnet_python_tracks(path: str, limits: Limits, s3fd=None,
                           way: Conversions = CONVERSIONS[SYNCNET_PYTHON]) -> list[FaceTrack]:
    """run_pipeline.py (or LatentSync's copy: `way`) then SyncNetInstance.evaluate's conversions
    (their commands, in order)."""
    from scipy.io import wavfile

    MediaReader(path, limits).close()  # the header's limits (size, resolution, length) before ffmpeg runs
    with tempfile.TemporaryDirectory(prefix="theval-lse-") as tmp:
        t = Path(tmp)
        (t / "frames").mkdir()
        video25 = t / f"video.{way.container}"
        _ffmpeg(path, "-i", path, "-qscale:v", "2", "-async", "1", "-r", str(lse.FPS), video25)
        _ffmpeg(path, "-i", video25, "-qscale:v", "2", "-threads", "1", "-f", "image2",
                t / "frames" / "%06d.jpg")
        if way.speech_from_input:  # MoChaBench: its "speech" input resampled (wav's default PCM)
            _ffmpeg(path, "-i", path, "-ac", "1", "-ar", str(lse.AUDIO_RATE), "-f", "wav", t / "audio.wav")
        else:
            _ffmpeg(path, "-i", video25, "-ac", "1", "-vn", "-acodec", "pcm_s16le", "-ar", str(lse.AUDIO_RATE),
                    t / "audio.wav")
        frames = _jpegs(t / "frames")
        if not frames:
            raise VideoError(path, "ffmpeg wrote no frame at 25 fps")
        with _detector(s3fd) as det:
            boxes = [det.boxes(cv2.cvtColor(cv2.imread(str(f)), cv2.COLOR_BGR2RGB)) for f in frames]
        # The one shot is the frames PySceneDetect reads from the 25 fps video with OpenCV: ffmpeg's
        # image2 extraction can repeat the last frames (dup), which the shot leaves out.
        boxes = boxes[:_opencv_frame_count(video25)]
        out = []
        for k, track in enumerate(ft.tracks(boxes, way.min_track, way.iou_eps, way.stop_at_mismatch)):
            windows = ft.crop_windows(track)
            video = t / f"{k:05d}t.{way.container}"
            writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*way.fourcc), lse.FPS,
                                     (ft.CROP_SIZE, ft.CROP_SIZE))
            for j, index in enumerate(track.frames):
                writer.write(crop(cv2.imread(str(frames[int(index)])), *windows[j]))
            writer.release()
            start, end = track.frames[0] / lse.FPS, (track.frames[-1] + 1) / lse.FPS
            _ffmpeg(path, "-i", t / "audio.wav", "-ss", f"{start:.3f}", "-to", f"{end:.3f}", t / f"{k:05d}.wav")
            muxed = t / f"{k:05d}.{way.container}"
            _ffmpeg(path, "-i", video, "-i", t / f"{k:05d}.wav", "-c:v", "copy", "-c:a", way.crop_audio, muxed)
            # SyncNetInstance.evaluate's own extraction of the crop
            (t / f"c{k}").mkdir()
            _ffmpeg(path, "-i", muxed, "-threads", "1", "-f", "image2", t / f"c{k}" / "%06d.jpg")
            _ffmpeg(path, "-i", muxed, *way.crop_audio_args, "-ac", "1", "-vn", "-acodec", "pcm_s16le",
                    "-ar", str(lse.AUDIO_RATE), t / f"c{k}.wav")
            crops = np.stack([cv2.imread(str(f)) for f in _jpegs(t / f"c{k}")])
            _, pcm = wavfile.read(t / f"c{k}.wav")
            out.append(FaceTrack(track.frames, crops, np.asarray(pcm, np.int16)))
        return out
