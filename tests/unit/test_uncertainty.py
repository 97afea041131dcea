"""Bootstrap confidence intervals of the leaderboard (pure.scoring.uncertainty) on synthetic
per-video values whose truth is known."""
import math

import numpy as np
import pytest

from theval_mesh.pure.scoring.final_score import RawRow, leaderboard, parse_weights
from theval_mesh.pure.scoring.names import METRICS
from theval_mesh.pure.scoring.uncertainty import bootstrap

WEIGHTS = parse_weights(None)
TRUE_GT = np.linspace(1.0, 8.0, len(METRICS))  # every metric's GT mean, well away from zero


def videos(n, mean, sd=0.5, seed=0, item_effect=None):
    rng = np.random.default_rng(seed)
    v = mean + rng.normal(0, sd, (n, len(METRICS)))
    return v if item_effect is None else v + item_effect[:n, None]


def board_of(values, gt="GT"):
    rows = [RawRow(m, dict(zip(METRICS, np.nanmean(v, axis=0)))) for m, v in values.items()]
    return leaderboard(rows, gt_name=gt)


def test_intervals_hold_the_estimate_and_narrow_with_more_videos():
    widths = {}
    # far from the GT: |model - GT| keeps its sign in every resample, so the width scales as 1/sqrt(n)
    everything = {"GT": videos(100, TRUE_GT, seed=1), "m": videos(100, TRUE_GT * 1.5, seed=2)}
    for n in (25, 100):
        values = {name: v[:n] for name, v in everything.items()}
        board = board_of(values)
        b = bootstrap(values, "GT", WEIGHTS, ranked=["m"], resamples=4000, seed=3)
        row = b.rows["m"]
        estimate = board.row("m")
        for j, metric in enumerate(METRICS):
            low, high = row.raw[metric]
            assert low < np.mean(values["m"][:, j]) < high
            low, high = row.normalised[metric]
            assert low < estimate.scores[metric] < high
        assert row.final[0] < estimate.final < row.final[1]
        assert set(row.groups) == set(estimate.groups)
        widths[n] = row.final[1] - row.final[0]
    assert 1.6 < widths[25] / widths[100] < 2.5  # about sqrt(4) = 2


def test_the_true_mean_is_covered_about_95_percent_of_the_time():
    covered = 0
    for trial in range(200):
        values = {"GT": videos(40, TRUE_GT, seed=trial), "m": videos(40, TRUE_GT, seed=1000 + trial)}
        low, high = bootstrap(values, "GT", WEIGHTS, ranked=["m"], resamples=1000, seed=trial).rows["m"].raw[METRICS[0]]
        covered += low <= TRUE_GT[0] <= high
    assert 0.89 <= covered / 200 <= 0.99


def test_a_fixed_seed_repeats_and_the_gt_own_error_widens_the_intervals():
    values = {"GT": videos(30, TRUE_GT, seed=1), "m": videos(30, TRUE_GT * 1.2, seed=2)}
    first = bootstrap(values, "GT", WEIGHTS, ranked=["m"], resamples=2000, seed=7)
    assert first == bootstrap(values, "GT", WEIGHTS, ranked=["m"], resamples=2000, seed=7)
    assert first != bootstrap(values, "GT", WEIGHTS, ranked=["m"], resamples=2000, seed=8)
    assert first.gt_resampled and first.rows["GT"].final is None and first.rows["GT"].normalised == {}
    fixed = bootstrap(values, "GT", WEIGHTS, ranked=["m"], resamples=2000, seed=7,
                      gt_fixed=dict(zip(METRICS, values["GT"].mean(axis=0))))
    assert not fixed.gt_resampled and "GT" not in fixed.rows
    width = {k: b.rows["m"].final[1] - b.rows["m"].final[0] for k, b in (("resampled", first), ("fixed", fixed))}
    assert width["resampled"] > 1.2 * width["fixed"]


def test_nan_values_are_left_out_as_the_leaderboard_leaves_them():
    values = {"GT": videos(20, TRUE_GT, seed=1), "m": videos(20, TRUE_GT, seed=2)}
    values["m"][:15, 0] = np.nan  # 5 videos left with the first metric
    values["m"][:, 1] = np.nan    # no video with the second: its scores are NaN, so is the Final
    b = bootstrap(values, "GT", WEIGHTS, ranked=[], resamples=500, seed=0).rows["m"]
    low, high = b.raw[METRICS[0]]
    assert low < np.nanmean(values["m"][:, 0]) < high
    assert all(math.isnan(x) for x in (*b.raw[METRICS[1]], *b.final))


def test_pairing_over_shared_items_separates_what_item_noise_hides():
    """Model b is model a plus a constant on every item, items vary a lot: paired over the items,
    the two are apart; unpaired, the item noise hides it."""
    n = 30
    items = [f"clip_{i:02d}.mp4" for i in range(n)]
    effect = np.random.default_rng(5).normal(0, 3.0, n)
    a = videos(n, TRUE_GT * 2, sd=0.01, seed=1, item_effect=effect)  # far above the GT, like b
    values = {"GT": videos(n, TRUE_GT, seed=2), "a": a, "b": a + 0.3}
    ranked = [r.model for r in board_of(values).rows if r.rank]
    assert ranked == ["a", "b"]
    paired = bootstrap(values, "GT", WEIGHTS, ranked, items={"a": items, "b": items}, resamples=2000, seed=1)
    unpaired = bootstrap(values, "GT", WEIGHTS, ranked, resamples=2000, seed=1)
    (p,), (u,) = paired.comparisons, unpaired.comparisons
    assert (p.paired_items, p.apart) == (n, True) and p.difference[0] > 0
    assert (u.paired_items, u.apart) == (0, False) and u.difference[0] < 0 < u.difference[1]
    assert "not significantly apart" in u.note(0.95) and "unpaired" in u.note(0.95)


def test_resamples_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        bootstrap({"GT": videos(3, TRUE_GT)}, "GT", WEIGHTS, ranked=[], resamples=0)


def test_a_model_of_one_video_has_no_interval_and_the_tables_say_n_1():
    """The issue's case: a model with one video showed a zero-width interval."""
    from theval_mesh.pure.scoring import tables
    values = {"GT": videos(12, TRUE_GT, seed=1), "many": videos(12, TRUE_GT * 1.2, seed=2),
              "one": videos(1, TRUE_GT * 1.1, seed=3)}
    board = board_of(values)
    ranked = [r.model for r in board.rows if r.rank is not None]
    board.uncertainty = bootstrap(values, "GT", WEIGHTS, ranked=ranked, resamples=500, seed=3)
    assert "one" not in board.uncertainty.rows and "many" in board.uncertainty.rows
    assert board.uncertainty.single == ["one"]
    assert all(c.better != "one" and c.worse != "one" for c in board.uncertainty.comparisons)
    for text in (tables.format_leaderboard_text(board), tables.leaderboard_markdown(board)):
        line = next(row for row in text.splitlines() if " one " in row)
        assert "n=1, no interval" in line
        assert "one: n=1, no interval (the resamples of one video are that video)" in text
    cells = tables.leaderboard_latex(board).split("\n")
    row = next(c for c in cells if c.split(" & ")[1:2] == ["one"])
    assert r"$\pm$" not in row  # the mean alone
