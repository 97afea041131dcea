"""Human alignment (paper Table 2): how well a metric ranks models as people do.

Per metric, the Spearman rank correlation between the models' scores and their human win rates,
its p-value (scipy's t-approximation) and a percentile bootstrap CI over models. Pure math, no I/O.

Decisions:
- A model whose score on a metric is NaN is left out of that metric only (its `n` says how many
  models are behind each row), so one missing metric does not cost the others a model.
- Every metric is bootstrapped with the same seed, so metrics of the same `n` see the same
  resamples and their intervals are comparable.
- A resample that draws one value on a side (all the same model, or tied values) has no rank
  correlation: it is dropped and counted, not counted as 0.
"""
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
MIN_MODELS = 3  # fewer and Spearman's rho is +-1 or undefined


@dataclass(frozen=True)
class WinRate:
    rate: float
    wins: int | None = None         # None: a win rate given as such
    comparisons: int | None = None  # judgements the model appeared in, where known


@dataclass(frozen=True)
class Correlation:
    metric: str
    rho: float
    p_value: float
    ci: tuple     # (low, high); NaN when no resample had a correlation
    n: int        # models with a finite score on this metric
    dropped: int  # resamples left out because a side was constant


def win_rates(judgements: Iterable) -> dict:
    """model -> WinRate from pairwise judgements (model_a, model_b, preferred): the judgements a
    model won over the judgements it appeared in."""
    wins, seen = {}, {}
    for a, b, preferred in judgements:
        if preferred not in (a, b):
            raise ValueError(f"preferred {preferred!r} is neither {a!r} nor {b!r}")
        for model in (a, b):
            seen[model] = seen.get(model, 0) + 1
            wins.setdefault(model, 0)
        wins[preferred] += 1
    return {m: WinRate(wins[m] / seen[m], wins[m], seen[m]) for m in seen}


def spearman(x, y) -> tuple[float, float]:
    """Spearman's rho and its two-sided p-value as scipy reports them; (NaN, NaN) when a side is
    constant (no ranking to correlate)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def p_value(rho: float, n: int) -> float:
    """Two-sided p-value of a Spearman rho over n models by the t-approximation (what spearmanr
    computes): t = rho * sqrt((n - 2) / (1 - rho^2)) on n - 2 degrees of freedom."""
    if abs(rho) >= 1:
        return 0.0
    t = abs(rho) * math.sqrt((n - 2) / (1 - rho * rho))
    return float(2 * stats.t.sf(t, n - 2))


def bootstrap_ci(x, y, resamples: int = RESAMPLES, seed: int = SEED,
                 level: float = LEVEL) -> tuple[tuple, int]:
    """Percentile CI of Spearman's rho over models drawn with replacement, and how many resamples
    were dropped because a side was constant. Vectorised: a (resamples, n) index matrix, each row
    ranked (average ties), then the Pearson correlation of the ranks row by row."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    index = np.random.default_rng(seed).integers(0, len(x), (resamples, len(x)))
    rx = stats.rankdata(x[index], axis=1)
    ry = stats.rankdata(y[index], axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    sx, sy = np.sqrt((rx * rx).sum(axis=1)), np.sqrt((ry * ry).sum(axis=1))
    # Ranks are multiples of 0.5, so a constant side centres to exactly 0.
    defined = (sx > 0) & (sy > 0)
    rho = (rx[defined] * ry[defined]).sum(axis=1) / (sx[defined] * sy[defined])
    dropped = int(resamples - defined.sum())
    if rho.size == 0:
        return (math.nan, math.nan), dropped
    tail = 50 * (1 - level)
    low, high = np.percentile(np.clip(rho, -1, 1), [tail, 100 - tail])
    return (float(low), float(high)), dropped


def correlate(metric: str, scores: Mapping, human: Mapping, resamples: int = RESAMPLES,
              seed: int = SEED, level: float = LEVEL) -> Correlation:
    """One row of the table: scores and human are model -> number over the same models; models
    with a NaN score are left out of this metric."""
    models = [m for m in human if math.isfinite(scores[m])]
    x = [scores[m] for m in models]
    y = [human[m] for m in models]
    if len(models) < MIN_MODELS:
        return Correlation(metric, math.nan, math.nan, (math.nan, math.nan), len(models), 0)
    rho, p = spearman(x, y)
    ci, dropped = bootstrap_ci(x, y, resamples, seed, level)
    return Correlation(metric, rho, p, ci, len(models), dropped)


def align(columns: Mapping, human: Mapping, resamples: int = RESAMPLES, seed: int = SEED,
          level: float = LEVEL) -> list[Correlation]:
    """A Correlation per column (metric -> {model: score}), in the columns' order."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    return [correlate(metric, scores, human, resamples, seed, level) for metric, scores in columns.items()]


def format_p(p: float) -> str:
    """As the published table prints p-values: 3 decimals, "<0.001" where that rounds to 0.000,
    "<0.0001" below 1e-4. (Its Quality row, rho 0.713 over 18 models, p = 0.0009, reads "0.001":
    rounded, not "<0.001".)"""
    if math.isnan(p):
        return "nan"
    if p < 0.0001:
        return "<0.0001"
    if p < 0.0005:
        return "<0.001"
    return f"{p:.3f}"
