"""Bootstrap confidence intervals at leaderboard scale: 17 models x 100 videos (plus a GT of 100),
10,000 resamples, vectorised (pure.scoring.uncertainty) against a plain loop that scores each
resample with the leaderboard itself (the obvious way), timed on a slice of the resamples and
scaled. Target: under 5 s.

    .venv/bin/python bench/bootstrap.py [MODELS] [VIDEOS] [RESAMPLES]
"""
import sys
import time

import numpy as np

from theval_mesh.pure.scoring.final_score import RawRow, leaderboard, parse_weights
from theval_mesh.pure.scoring.names import METRICS
from theval_mesh.pure.scoring.uncertainty import bootstrap

LOOP_RESAMPLES = 200  # the loop's slice; its time is scaled to the full count


def data(models: int, videos: int):
    rng = np.random.default_rng(0)
    gt = np.arange(1.0, 9.0)
    values = {"GT": gt + rng.normal(0, 0.3, (videos, 8))}
    for i in range(models):
        values[f"model_{i:02d}"] = gt * rng.uniform(0.7, 1.3, 8) + rng.normal(0, 0.3, (videos, 8))
    return values


def loop(values: dict, resamples: int, rng) -> None:
    for _ in range(resamples):
        rows = [RawRow(m, dict(zip(METRICS, np.nanmean(v[rng.integers(0, len(v), len(v))], axis=0))))
                for m, v in values.items()]
        leaderboard(rows, gt_name="GT")


def main(models=17, videos=100, resamples=10_000):
    values = data(models, videos)
    board = leaderboard([RawRow(m, dict(zip(METRICS, v.mean(axis=0)))) for m, v in values.items()], gt_name="GT")
    ranked = [r.model for r in board.rows if r.rank]
    items = {m: [f"clip_{i:03d}" for i in range(videos)] for m in values}
    start = time.perf_counter()
    result = bootstrap(values, "GT", parse_weights(None), ranked, items=items, resamples=resamples)
    vectorised = time.perf_counter() - start
    start = time.perf_counter()
    loop(values, LOOP_RESAMPLES, np.random.default_rng(0))
    looped = (time.perf_counter() - start) * resamples / LOOP_RESAMPLES
    apart = sum(c.apart for c in result.comparisons)
    print(f"{models} models x {videos} videos, {resamples} resamples (paired comparisons of the "
          f"{len(result.comparisons)} adjacent ranks included, {apart} apart)")
    print(f"vectorised: {vectorised:.2f} s (target < 5 s); a loop over the leaderboard: {looped:.1f} s "
          f"(scaled from {LOOP_RESAMPLES}); speed-up {looped / vectorised:.0f}x")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
