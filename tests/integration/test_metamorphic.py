"""Each degradation of the synthetic kit moves its metric the expected way (real models)."""
import math

import pytest

from theval_mesh.core.results import OK

pytestmark = pytest.mark.slow


def raw(board_results, model, metric):
    _, results = board_results
    vals = [r.metrics[metric] for r in results if r.model == model and r.status == OK
            and not math.isnan(r.metrics[metric])]
    assert vals, (model, metric)
    return sum(vals) / len(vals)


@pytest.mark.parametrize("variant, metric, direction", [
    ("audio_shift", "lip_sync", "up"),
    ("frozen_mouth", "lip_dynamics", "down"),
    ("silent_mouth", "silent_lip_stability", "up"),
    ("static_head", "head_motion", "down"),
    ("still_brows", "eyebrow_dynamics", "down"),
    ("exaggerated_mouth", "lip_dynamics", "up"),
    ("blur", "global_aesthetic", "down"),
    ("blur", "mouth_quality", "down"),
    ("blur", "face_quality", "down"),
    ("noise", "global_aesthetic", "down"),
    ("noise", "mouth_quality", "down"),
    ("noise", "face_quality", "down"),
])
def test_degradation_moves_metric(evaluated, variant, metric, direction):
    gt, degraded = raw(evaluated, "GT", metric), raw(evaluated, variant, metric)
    if direction == "up":
        assert degraded > gt, (variant, metric, gt, degraded)
    else:
        assert degraded < gt, (variant, metric, gt, degraded)


def test_gt_beats_every_variant_on_final_score(evaluated):
    board, _ = evaluated
    gt = board.row("GT")
    for row in board.rows:
        if not row.is_gt:
            assert row.final < gt.final, (row.model, row.final)


def test_every_video_scored_with_provenance(evaluated):
    _, results = evaluated
    assert all(r.status == OK for r in results)
    p = results[0].provenance
    assert p["profile"] == "reference" and "mediapipe" in p["landmarks"]["backend"]
    assert all(str(v).startswith("proxy:") for k, v in p["quality"].items() if k != "mode")
