"""The noise-floor arithmetic (pure/scoring/robustness.py), the paired bootstrap it uses
(uncertainty.paired_scores) and the re-encodes themselves (synth/reencode.py) on a small real clip.
The whole command on real clips: tests/integration/test_robustness.py."""
import math

import av
import numpy as np
import pytest

from tests.support.video_files import tone, write_video
from theval_mesh.pure.scoring import robustness as rb
from theval_mesh.pure.scoring.final_score import normalised
from theval_mesh.pure.scoring.names import METRICS
from theval_mesh.pure.scoring.uncertainty import paired_scores
from theval_mesh.synth import reencode

WEIGHTS = dict.fromkeys(METRICS, 1.0)


def test_a_re_encode_that_changes_nothing_scores_one_with_no_width():
    gt = np.random.default_rng(0).uniform(1, 2, (6, len(METRICS)))
    scores = paired_scores(gt, gt.copy(), WEIGHTS, resamples=500)
    assert all(v == pytest.approx(1.0) and ci == pytest.approx((1.0, 1.0)) for v, ci in scores.values())


def test_paired_scores_are_the_leaderboards_on_all_clips_and_pairing_narrows_the_interval():
    rng = np.random.default_rng(1)
    gt = rng.uniform(1, 3, (8, len(METRICS)))   # clips differ a lot from each other
    model = gt * 1.05                             # the re-encode moves each by 5 %
    scores = paired_scores(gt, model, WEIGHTS, resamples=2000)
    m = METRICS[0]
    assert scores[m][0] == pytest.approx(normalised(model[:, 0].mean(), gt[:, 0].mean()))
    assert scores[m][0] == pytest.approx(0.95)
    low, high = scores[m][1]
    assert high - low < 1e-9  # the same 5 % on every clip: pairing leaves nothing to vary
    assert scores["Final score"][0] == pytest.approx(0.95)


def test_paired_scores_refuse_rows_that_do_not_pair():
    with pytest.raises(ValueError, match="must pair"):
        paired_scores(np.ones((3, len(METRICS))), np.ones((2, len(METRICS))), WEIGHTS)


def test_changes_floors_and_gaps_below_them():
    table = rb.changes("fps", "25 -> 30 fps", {"Lip sync": (0.9, (0.85, 0.95)), rb.FINAL: (0.98, None)})
    table += rb.changes("crf+5", "CRF 28", {"Lip sync": (0.97, (0.9, 1.0)), rb.FINAL: (0.99, (0.97, 1.0))})
    assert table[0].change == pytest.approx(-0.1) and table[0].low == pytest.approx(-0.15)
    assert math.isnan(table[1].low)
    floors = rb.noise_floors(table)
    assert floors["Lip sync"] == (pytest.approx(0.1), "fps") and floors[rb.FINAL] == (pytest.approx(0.02), "fps")
    notes = rb.below_floor([("a", 0.90), ("b", 0.89), ("c", 0.80)], 0.02, "fps")
    assert len(notes) == 1 and notes[0].startswith("a and b: Final-score gap 0.0100 is below the noise floor 0.0200")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("reencode") / "c.mp4"
    rng = np.random.default_rng(2)
    frames = [np.clip(rng.normal(128, 40, (64, 96, 3)), 0, 255).astype(np.uint8) for _ in range(25)]
    write_video(path, frames, fps=25, audio=tone(1.0))
    return path


def _streams(path):
    with av.open(str(path)) as c:
        v, a = c.streams.video[0], c.streams.audio[0]
        frames = sum(1 for _ in c.decode(video=0))
        return v.codec_context.name, v.width, v.height, float(v.average_rate), frames, a.codec_context.name


@pytest.mark.parametrize("kind, expect", [
    ("video-codec", ("hevc", 96, 64, 25.0, 25, "aac")),
    ("audio-codec", ("h264", 96, 64, 25.0, 25, "mp3float")),  # MP2 in MP4: ffmpeg reads it with its MPEG audio decoder
    ("crf+5", ("h264", 96, 64, 25.0, 25, "aac")),
    ("fps", ("h264", 96, 64, 30.0, 30, "aac")),
    ("resolution", ("h264", 192, 128, 25.0, 25, "aac")),  # under 512 px: doubled
])
def test_each_re_encode_changes_only_its_property(clip, tmp_path, kind, expect):
    out = reencode.reencode(clip, tmp_path / f"{kind}.mp4", kind)
    assert _streams(out) == expect
    assert reencode.describe(kind, clip).what


def test_an_unreadable_video_fails_with_its_name(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    with pytest.raises(Exception, match="bad.mp4"):
        reencode.reencode(bad, tmp_path / "out.mp4", "crf-5")
    assert not (tmp_path / "out.mp4").exists()


def test_the_limits_hold_for_a_re_encode(clip, tmp_path):
    from theval_mesh.pure.errors import VideoError
    from theval_mesh.pure.limits import Limits

    with pytest.raises(VideoError, match="c.mp4"):
        reencode.reencode(clip, tmp_path / "big.mp4", "fps", Limits(max_side_px=32))
    with pytest.raises(VideoError, match="limit"):
        reencode.reencode(clip, tmp_path / "long.mp4", "audio-codec", Limits(max_duration_s=0.5))
    assert not (tmp_path / "big.mp4").exists() and not (tmp_path / "long.mp4").exists()
