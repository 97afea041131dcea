"""1- and 2-frame videos: the dynamics metrics (lip dynamics, head motion, eyebrow dynamics) are a
std or a variance of differences over the frames, which one or two samples cannot measure."""
import math

import pytest

from tests.support.video_files import write_video
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.compute import MetricValues
from theval_mesh.core.engine import Engine
from theval_mesh.pure.settings import RunSettings
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow
DYNAMICS = ("lip_dynamics", "head_motion", "eyebrow_dynamics")


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """{(profile, frames): VideoResult} of real 1- and 2-frame videos of the synthetic talking head
    (frames 0 and 12 of a clip: the head and the mouth moved between them)."""
    tmp = tmp_path_factory.mktemp("short")
    kit = generate_kit(tmp / "kit", seed=3, n_clips=1, duration_s=1.5, size=128, variants=())
    frames = [f for _, f in MediaReader(kit.video("clip_00", "gt")).frames()]
    videos = {n: write_video(tmp / f"{n}_frames.mp4", [frames[0], frames[12]][:n]) for n in (1, 2)}
    out = {}
    for profile in ("reference", "paper"):
        engine = Engine(RunSettings(profile=profile, quality="proxy"))
        for n, path in videos.items():
            out[profile, n] = engine.score_video(path)
    return out


@pytest.mark.parametrize("n", [1, 2])
def test_paper_dynamics_over_fewer_than_3_frames_are_nan_with_the_reason(scored, n):
    result = scored["paper", n]
    assert result.status == "ok" and result.frames_total == n and result.face_frames == n
    for key in DYNAMICS:
        assert math.isnan(result.metrics[key]), key
        assert result.nan_reasons[key] == f"needs at least 3 frames, the video has {n} with a face"
    assert not math.isnan(result.metrics["global_aesthetic"])  # the rest still scores


@pytest.mark.parametrize("n", [1, 2])
def test_reference_keeps_the_reference_code_s_numbers_and_warns(scored, n):
    """The reference code at 3603338 gives numbers for one or two frames:
    - Naturalness/lip_dynamics.py:92-96: np.std (population) of each distance over the kept
      frames, then the mean: 0.0 for one frame, the half-difference for two.
    - Naturalness/eyebrow_dynamics.py:114-132: mean |change| over the transitions between face
      frames, 0.0 without a transition (one frame).
    - Naturalness/head_motion_dynamics.py:93-113: sqrt(A*D + T) where the derivative variance D
      is 0.0 for fewer than 2 differences (lines 101-103) and T is 0.0 for one frame (line 106):
      0.0 for one frame, sqrt(T) for two.
    """
    result = scored["reference", n]
    assert result.status == "ok" and result.face_frames == n
    for key in DYNAMICS:
        value = result.metrics[key]
        assert (value == 0.0) if n == 1 else (math.isfinite(value) and value > 0.0), (key, value)
        assert key not in result.nan_reasons
        assert (f"{key}: needs at least 3 frames, the video has {n} with a face (kept as the reference code "
                "computes it)") in result.warnings


def test_three_frames_are_enough():
    m = MetricValues()
    for profile in ("paper", "reference"):
        m.set_dynamic(f"head_motion_{profile}", 0.5, "no face found", 3, profile)
    assert m.values == {"head_motion_paper": 0.5, "head_motion_reference": 0.5}
    assert m.nan_reasons == {} and m.warnings == []
