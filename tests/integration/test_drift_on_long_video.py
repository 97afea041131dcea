"""Temporal drift (core.drift) through the real engine: a 16 s synthetic clip, and the same clip
blurred from 10 s on. The blur shows as a global-aesthetic drift in the last window only; the
clean clip has none; a clip of at most two windows gets no drift analysis."""
from pathlib import Path

import cv2
import pytest

from theval_mesh import Scorer
from theval_mesh.backends.media.decode import read_all_frames
from theval_mesh.pure.metrics.registry import GLOBAL_AESTHETIC
from theval_mesh.synth import generate_kit
from theval_mesh.synth.mp4 import Mp4Writer
from theval_mesh.synth.variants import BLUR_SIGMA_256

pytestmark = pytest.mark.slow  # two 16 s clips through MediaPipe: ~20 s

SECONDS, SIZE, BLUR_FROM_S = 16.0, 256, 10.0


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    out = tmp_path_factory.mktemp("long")
    kit = generate_kit(out, seed=3, n_clips=1, duration_s=SECONDS, size=SIZE, variants=())
    clean = Path(kit.out_dir) / "gt" / "clip_00.mp4"
    frames, reader = read_all_frames(clean)
    writer = Mp4Writer(out / "late_blur.mp4", SIZE, kit.fps)
    for k, rgb in enumerate(frames):
        late = k / kit.fps >= BLUR_FROM_S
        writer.write(cv2.GaussianBlur(rgb, (0, 0), BLUR_SIGMA_256) if late else rgb)
    return clean, writer.close()


def aesthetic_flags(result) -> list[str]:
    return [f for f in result.drift["flags"] if f.startswith(GLOBAL_AESTHETIC.name)]


def test_a_late_blur_drifts_in_the_last_window_only(clips):
    clean, blurred = clips
    scorer = Scorer(quality="proxy")
    steady, late = scorer.score(clean), scorer.score(blurred)
    assert steady.drift["windows"] == late.drift["windows"] == [[0.0, 5.0], [5.0, 10.0], [10.0, SECONDS]]
    assert aesthetic_flags(steady) == []
    values = late.drift["values"][GLOBAL_AESTHETIC.key]
    assert values[2] < 0.7 * values[0] and values[1] == pytest.approx(values[0], rel=0.02)
    (flag,) = aesthetic_flags(late)
    assert "10-16 s" in flag
    low, high = late.drift["ci"][GLOBAL_AESTHETIC.key][2]
    assert low <= values[2] <= high


def test_a_video_of_two_windows_or_less_has_no_drift_analysis(clips, tmp_path):
    clean, _ = clips
    frames, _ = read_all_frames(clean)
    writer = Mp4Writer(tmp_path / "short.mp4", SIZE, 25)
    for rgb in frames[:25 * 10]:  # exactly two windows
        writer.write(rgb)
    assert Scorer(quality="proxy").score(writer.close()).drift == {}
