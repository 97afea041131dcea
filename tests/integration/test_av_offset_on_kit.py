"""The audio-visual offset estimate end to end: one synthetic clip rendered once and encoded
with its audio shifted by -0.4 ... +0.4 s, each scored by the real engine (MediaPipe landmarks,
Silero VAD, the RMS envelope): every shift comes back within one frame, beside lip-sync."""
import pytest

from theval_mesh.core.engine import Engine
from theval_mesh.pure.settings import RunSettings
from theval_mesh.synth.kit import write_shifted_clips

pytestmark = pytest.mark.slow
SHIFTS = [-0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.4]
FPS = 25


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    clips = write_shifted_clips(tmp_path_factory.mktemp("shifts"), SHIFTS, seed=11, duration_s=5.0, size=256, fps=FPS)
    engine = Engine(RunSettings(quality="proxy", single_pass=True))  # one FaceMesh pass: the offset's frames
    return {shift: engine.score_video(path, "m") for shift, path in clips.items()}


def test_every_shift_is_recovered_within_one_frame(scored):
    found = {shift: r.av_offset.get("ms") for shift, r in scored.items()}
    print("\naudio-visual offset, true -> estimated ms: "
          + ", ".join(f"{1000 * s:+.0f} -> {ms:+.0f}" for s, ms in found.items()))
    for shift, r in scored.items():
        assert r.status == "ok" and r.av_offset, (shift, r.reason, r.warnings)
        assert abs(r.av_offset["ms"] - 1000 * shift) <= 1000 / FPS, (shift, r.av_offset)
        assert r.av_offset["confidence"] > 0.1 and r.av_offset["frames"] > 50


def test_lip_sync_worsens_with_the_shift_and_the_offset_says_by_how_much(scored):
    """What lip-sync alone cannot say: it moves with the shift but has no sign or unit."""
    assert scored[0.0].metrics["lip_sync"] < scored[0.4].metrics["lip_sync"]
    assert scored[0.0].metrics["lip_sync"] < scored[-0.4].metrics["lip_sync"]
