"""Every NaN reason core.compute.compute_metrics can give, each from the smallest series that
produces it. The series are built in memory (a few frames of 478 points; the head pose comes from
the real head-pose backend on those points); one test scores a real tiny file end to end.

The reasons, as compute.py words them (read from the code):
  global_aesthetic        "no frames scored"
  mouth_quality           "no face found"
  face_quality            "no face found"
  head_motion             "no face found" (reference) / "needs at least 3 frames, ..." (paper)
  lip_dynamics            "needs at least 3 frames, the video has N with a face" (paper); its own
                          "fewer than 2 frames with a face" cannot show: lip_dynamics() is NaN only
                          for one frame in paper, where the 3-frame reason replaces it
  eyebrow_dynamics        "needs at least 3 frames, ..." (paper) / "fewer than 2 frames with a face"
  silent_lip_stability    the audio track's problem / "no audio track" / "no silence of at least
                          0.3 s" / "fewer than 2 silent frames with a face"
  lip_sync                the audio track's problem / "no audio track" / "speech covers N% of the
                          frames (under 10%)" / "fewer than 2 speech frames with a face"
"""
import math

import numpy as np
import pytest

from tests.support.video_files import gradient, write_video
from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import estimate
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.core.compute import MIN_DYNAMIC_FRAMES, compute_metrics
from theval_mesh.core.frame_pass import FrameSeries
from theval_mesh.pure.metrics.landmark_sets import LEFT_EYE, RIGHT_EYE
from theval_mesh.pure.settings import RunSettings

FPS = 25.0
SIDE = 64
REFERENCE = RunSettings(profile="reference", quality="proxy", single_pass=True)
PAPER = RunSettings(profile="paper", quality="proxy", single_pass=True)
DYNAMICS = ("lip_dynamics", "head_motion", "eyebrow_dynamics")
SYNC = ("silent_lip_stability", "lip_sync")


def frames(n: int, faces=None, seed: int = 0) -> FrameSeries:
    """n frames of a 64x64 video; `faces`: the frame indices with a face (default all). Each face is
    the same random 478-point shape with a little jitter per frame; frames without one are NaN
    rows, as FaceMesh reports them. Quality scores as the frame pass gives them: global
    aesthetic (and, in `reference`, face quality) for every frame, mouth quality per face."""
    rng = np.random.default_rng(seed)
    faces = set(range(n)) if faces is None else set(faces)
    base = rng.uniform(0.3, 0.7, (478, 3))
    pts = np.full((n, 478, 3), np.nan, np.float32)
    for i in sorted(faces):
        pts[i] = base + rng.normal(0, 0.01, (478, 3))
    fs = FrameSeries(SIDE, SIDE, FPS, frame_count=n, header_frames=n,
                     landmarks={"single": LandmarkSeries.from_arrays(np.arange(n), pts)})
    fs.global_aesthetic = [0.5] * n
    fs.face_quality = [0.5] * n
    fs.mouth_quality = [0.4] * len(faces)
    return fs


def audio(speech, seconds: float) -> AudioSeries:
    """A loudness envelope over `seconds` and the VAD's speech segments."""
    times = np.arange(0.0, seconds, 0.05)
    return AudioSeries(rms=0.1 + 0.05 * np.sin(times * 7), rms_times=times, speech=list(speech))


def metrics(fs: FrameSeries, sound: AudioSeries, settings=REFERENCE):
    pose = estimate(fs.landmarks["single"].points, fs.width, fs.height)
    return compute_metrics(fs, pose, sound, settings)


def nan_with(m, key: str) -> str:
    assert math.isnan(m.values[key]), (key, m.values[key])
    return m.nan_reasons[key]


def test_a_clean_series_has_no_nan_and_no_reason():
    """The baseline every other test departs from: 20 face frames, speech then 0.56 s of silence."""
    m = metrics(frames(20), audio([(0.0, 0.2)], 0.8))
    assert m.nan_reasons == {} and m.warnings == []
    assert all(math.isfinite(v) for v in m.values.values()), m.values
    assert set(m.values) == {"global_aesthetic", "mouth_quality", "face_quality", *DYNAMICS, *SYNC}


def test_no_frames_scored_leaves_global_aesthetic_nan():
    """Only an empty series gets here (a video without decodable frames is refused earlier)."""
    fs = frames(0)
    fs.global_aesthetic = []
    m = metrics(fs, audio([], 0.0))
    assert nan_with(m, "global_aesthetic") == "no frames scored"
    assert m.counts["global_aesthetic"] == 0


@pytest.mark.parametrize("settings", [REFERENCE, PAPER], ids=["reference", "paper"])
def test_no_face_leaves_mouth_quality_nan(settings):
    fs = frames(8, faces=[])
    if settings is PAPER:
        fs.face_quality = []  # paper scores face crops, and there are none
    m = metrics(fs, audio([], 0.32), settings)
    assert nan_with(m, "mouth_quality") == "no face found"
    assert not math.isnan(m.values["global_aesthetic"])  # the frames still score
    if settings is PAPER:
        assert nan_with(m, "face_quality") == "no face found"
    else:  # the reference scores face quality on the full frames
        assert "face_quality" not in m.nan_reasons and m.values["face_quality"] == 0.5


def test_no_face_leaves_head_motion_nan_in_reference():
    """Reference: head motion NaN "no face found"; lip and eyebrow dynamics 0.0 (the reference
    code's numbers for a faceless video), no reason."""
    m = metrics(frames(8, faces=[]), audio([], 0.32))
    assert nan_with(m, "head_motion") == "no face found"
    assert m.values["lip_dynamics"] == 0.0 and m.values["eyebrow_dynamics"] == 0.0
    assert "lip_dynamics" not in m.nan_reasons and "eyebrow_dynamics" not in m.nan_reasons


@pytest.mark.parametrize("faces", [0, 1, 2])
def test_paper_dynamics_need_three_face_frames(faces):
    m = metrics(frames(8, faces=range(faces)), audio([], 0.32), PAPER)
    for key in DYNAMICS:
        assert nan_with(m, key) == f"needs at least {MIN_DYNAMIC_FRAMES} frames, the video has {faces} with a face"
        assert m.counts[key] == faces


def test_reference_keeps_dynamics_of_two_face_frames_with_a_warning():
    m = metrics(frames(8, faces=[0, 5]), audio([], 0.32))
    for key in DYNAMICS:
        assert math.isfinite(m.values[key]) and key not in m.nan_reasons, key
        assert (f"{key}: needs at least {MIN_DYNAMIC_FRAMES} frames, the video has 2 with a face "
                "(kept as the reference code computes it)") in m.warnings


def test_paper_eyebrow_dynamics_without_two_usable_faces():
    """Three face frames, but two with both eyes at one point (no scale to normalise by): one
    usable frame is no std. (The reason says "frames with a face"; they are frames with usable eyes.)"""
    fs = frames(3)
    pts = fs.landmarks["single"].points
    for i in (1, 2):
        pts[i, list(LEFT_EYE) + list(RIGHT_EYE)] = pts[i, LEFT_EYE[0]]
    fs.landmarks["single"] = LandmarkSeries.from_arrays(np.arange(3), pts)
    m = metrics(fs, audio([], 0.12), PAPER)
    assert nan_with(m, "eyebrow_dynamics") == "fewer than 2 frames with a face"
    assert math.isfinite(m.values["lip_dynamics"])  # the lips were left alone


def test_no_audio_track_leaves_both_sync_metrics_nan():
    m = metrics(frames(8), AudioSeries())
    for key in SYNC:
        assert nan_with(m, key) == "no audio track"
        assert m.counts[key] == 0
    assert all(math.isfinite(m.values[k]) for k in DYNAMICS)  # the rest still scores


def test_an_unusable_audio_track_gives_its_own_problem_as_the_reason():
    m = metrics(frames(8), AudioSeries(problem="audio track has NaN or infinite samples"))
    for key in SYNC:
        assert nan_with(m, key) == "audio track has NaN or infinite samples"


def test_silences_under_0_3_s_leave_silent_lip_nan():
    """20 frames at 25 fps, speech first: 8 silent frames at the end (0.32 s) count, 7 (0.28 s) do not."""
    m = metrics(frames(20), audio([(0.0, 0.44)], 0.8))  # speech in frames 0-11
    assert math.isfinite(m.values["silent_lip_stability"]) and m.counts["silent_lip_stability"] == 8
    m = metrics(frames(20), audio([(0.0, 0.5)], 0.8))  # speech in frames 0-12
    assert nan_with(m, "silent_lip_stability") == "no silence of at least 0.3 s"
    assert m.counts["silent_lip_stability"] == 0


def test_speech_everywhere_leaves_silent_lip_nan():
    m = metrics(frames(8), audio([(0.0, 0.32)], 0.32))
    assert nan_with(m, "silent_lip_stability") == "no silence of at least 0.3 s"
    assert math.isfinite(m.values["lip_sync"])


def test_a_silence_without_faces_leaves_silent_lip_nan():
    """All 8 frames silent (0.32 s), a face in one of them."""
    m = metrics(frames(8, faces=[3]), audio([], 0.32))
    assert nan_with(m, "silent_lip_stability") == "fewer than 2 silent frames with a face"
    assert m.counts["silent_lip_stability"] == 1


def test_no_speech_leaves_lip_sync_nan():
    m = metrics(frames(8), audio([], 0.32))
    assert nan_with(m, "lip_sync") == "speech covers 0% of the frames (under 10%)"
    assert math.isfinite(m.values["silent_lip_stability"])  # all silence: that one scores


def test_too_little_speech_leaves_lip_sync_nan():
    """Speech in 2 frames of 25 (8 %), each with a face: enough frames, too small a share."""
    m = metrics(frames(25), audio([(0.0, 0.04)], 1.0))
    assert nan_with(m, "lip_sync") == "speech covers 8% of the frames (under 10%)"


def test_speech_without_faces_leaves_lip_sync_nan():
    """Speech over all 8 frames, a face in one of them."""
    m = metrics(frames(8, faces=[2]), audio([(0.0, 0.32)], 0.32))
    assert nan_with(m, "lip_sync") == "fewer than 2 speech frames with a face"
    assert m.counts["lip_sync"] == 1


def test_a_real_faceless_silent_file_scores_with_the_reasons(tmp_path):
    """End to end on a real 8-frame 64x48 file without a face or an audio track: real decode,
    MediaPipe FaceMesh, the quality proxy and the composition (core.engine)."""
    from theval_mesh.core.engine import Engine
    path = write_video(tmp_path / "gradient.mp4", gradient(8))
    result = Engine(REFERENCE).score_video(path, "m")
    assert result.status == "ok" and result.face_frames == 0 and result.frames_total == 8
    assert result.nan_reasons == {"mouth_quality": "no face found", "head_motion": "no face found",
                                  "silent_lip_stability": "no audio track", "lip_sync": "no audio track"}
    assert math.isfinite(result.metrics["global_aesthetic"])
    assert result.metrics["lip_dynamics"] == 0.0 and result.metrics["eyebrow_dynamics"] == 0.0
    assert any(w.startswith("no face found in any of the 8 frames used") for w in result.warnings), result.warnings
