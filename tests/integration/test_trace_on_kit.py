"""Each video's trace (core.trace: what the report plots) follows the kit's known driving signals:
the mouth openness its mouth, the roll its head roll, the eyebrow distance its brow raises; the
worst frames are the lowest-scored ones; speech segments are the VAD's."""
from pathlib import Path

import numpy as np
import pytest

from theval_mesh.core.trace import TRACE_POINTS, WORST_FRAMES

pytestmark = pytest.mark.slow  # the kit's evaluation (shared with the other kit tests)


def gt_results(evaluated):
    _, results = evaluated
    return [r for r in results if r.model == "GT" and r.status == "ok"]


def correlation(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def test_the_trace_follows_the_driving_signals(evaluated, kit):
    results = gt_results(evaluated)
    assert results
    for r in results:
        trace = r.trace
        frames = np.asarray(trace["frame"], int)
        assert len(frames) == min(TRACE_POINTS, r.frames_used)
        assert all(len(trace[k]) == len(frames) for k in ("t", "mouth_openness", "loudness", "pitch", "yaw",
                                                          "roll", "eyebrow", "mouth_quality", "face_quality"))
        signals = np.load(Path(kit.out_dir) / "signals" / f"{Path(r.video).stem}.npz")
        mouth = correlation(trace["mouth_openness"], signals["mouth_open"][frames])
        roll = correlation(trace["roll"], signals["roll_deg"][frames])
        brow = correlation(trace["eyebrow"], signals["brow_raise"][frames])
        assert mouth > 0.8 and abs(roll) > 0.8 and brow > 0.5, (r.video, mouth, roll, brow)
        speech = np.asarray(trace["speech"]).reshape(-1, 2)
        assert len(speech) and (speech[:, 1] > speech[:, 0]).all()


def test_the_worst_frames_are_the_lowest_scores(evaluated):
    for r in gt_results(evaluated):
        trace = r.trace
        assert len(trace["frame"]) == r.frames_used  # short clips: every frame is in the trace
        for key in ("mouth_quality", "face_quality"):
            scores = dict(zip(trace["frame"], trace[key]))
            worst = trace[f"worst_{key}"]
            assert len(worst) == WORST_FRAMES
            lowest = sorted(scores.values())[:WORST_FRAMES]
            # the trace keeps 4 significant digits: compare at that precision
            assert [scores[f] for f in worst] == pytest.approx(lowest, rel=1e-3)
