"""How sure a leaderboard is: percentile bootstrap confidence intervals over videos.

Each resample draws every model's videos with replacement (and the GT's, when the GT values come
from the user's videos rather than the published row: its own sampling error counts too), takes
the means as the leaderboard does (NaN values left out), and scores them with the leaderboard's
own functions (normalised, group_scores, final_score). The interval of a number is the central
`level` of its resampled values. Two adjacent ranks are compared on the difference of their Final
scores, paired over the source items both models have (a generated video and another model's of
the same audio and identity share a file name), drawn together so that what the items have in
common cancels out; models without two shared items are compared unpaired.

Vectorised: a resample is how often it draws each video, so a model's resampled
means are two matrix products, (resamples, videos) @ (videos, metrics).
"""
from dataclasses import dataclass, field

import numpy as np

from theval_mesh.pure.scoring.final_score import final_score, group_scores, normalised
from theval_mesh.pure.scoring.names import METRICS

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
MIN_PAIRED = 2  # shared items needed to pair two models
MIN_VIDEOS = 2  # a model's videos for an interval: the resamples of one video are that video (width 0)


@dataclass
class Intervals:
    """(low, high) per number of one row; NaN bounds where no resample gave a value."""
    raw: dict            # canonical metric name -> (low, high) of the mean over videos
    normalised: dict     # canonical metric name -> (low, high); empty for the GT row
    groups: dict         # group -> (low, high); empty for the GT row
    final: tuple | None  # (low, high); None for the GT row


@dataclass
class Comparison:
    """Two adjacent ranks: the difference of their Final scores (better minus worse)."""
    better: str
    worse: str
    difference: tuple    # (low, high)
    paired_items: int    # 0: unpaired
    apart: bool          # the interval excludes 0

    def note(self, level: float) -> str:
        how = f"paired over {self.paired_items} shared items" if self.paired_items else "unpaired"
        return (f"{self.better} and {self.worse} are not significantly apart: the {level:.0%} interval of "
                f"their Final-score difference is [{self.difference[0]:+.4f}, {self.difference[1]:+.4f}] "
                f"({how})")


@dataclass
class Bootstrap:
    resamples: int
    seed: int
    level: float
    gt_resampled: bool   # False: a fixed GT row (the published one), no sampling error of its own
    rows: dict = field(default_factory=dict)         # model -> Intervals
    comparisons: list = field(default_factory=list)  # Comparison per adjacent pair of ranks
    single: list = field(default_factory=list)       # models (the GT too) of one video: no interval


def _interval(samples: np.ndarray, level: float) -> tuple:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    tail = 50 * (1 - level)
    low, high = np.percentile(finite, [tail, 100 - tail])
    return (float(low), float(high))


def _draws(rng, n: int, resamples: int) -> np.ndarray:
    """(resamples, n): how many times each of n videos is drawn in each resample (n draws with
    replacement), counted in one bincount over all resamples."""
    picks = rng.integers(0, n, (resamples, n)) + n * np.arange(resamples)[:, None]
    return np.bincount(picks.ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)


def _means(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """(resamples, metrics) means of values (n, metrics) under each resample's draws, NaN values
    left out (NaN where a resample drew no value of a metric): two matrix products."""
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (draws @ np.where(finite, values, 0.0)) / (draws @ finite)


def mean_intervals(values, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> list[tuple]:
    """The percentile bootstrap interval of the mean of each column of values (videos, columns)
    over its videos, NaN values left out (the classic metrics' intervals). Fewer than 2 values: no
    interval (NaN bounds), since one video says nothing of the spread."""
    values = np.asarray(values, float).reshape(len(values), -1)
    none = (float("nan"), float("nan"))
    if not len(values):
        return [none] * values.shape[1]
    means = _means(values, _draws(np.random.default_rng(seed), len(values), resamples))
    enough = np.isfinite(values).sum(axis=0) >= 2
    return [_interval(means[:, j], level) if enough[j] else none for j in range(values.shape[1])]


# A set-level statistic (FID, FVD) is computed anew on each resample: a few hundred resamples,
# fewer when each costs a d x d eigendecomposition (more rows than feature dimensions on both sides).
SET_RESAMPLES, LARGE_SET_RESAMPLES = 1000, 200


def set_interval(statistic, n: int, resamples: int = SET_RESAMPLES, seed: int = SEED,
                 level: float = LEVEL) -> tuple:
    """The percentile bootstrap interval of a statistic of a whole set of n videos (FID, FVD):
    statistic(counts) is its value when video i is drawn counts[i] times. Fewer than 2 videos: no
    interval (NaN bounds)."""
    if n < 2:
        return (float("nan"), float("nan"))
    draws = _draws(np.random.default_rng(seed), n, resamples)
    return _interval(np.array([statistic(d) for d in draws], float), level)


def paired_scores(gt_values, model_values, weights: dict, resamples: int = RESAMPLES, seed: int = SEED,
                  level: float = LEVEL) -> dict:
    """A model scored against a GT whose videos are the same items (row i of both: one source clip,
    e.g. a clip and its re-encode), resampled together: what the item itself contributes cancels
    out. name (metric, group, "Final score") -> (the value from all items, its interval)."""
    gt_values = np.asarray(gt_values, float).reshape(-1, len(METRICS))
    model_values = np.asarray(model_values, float).reshape(-1, len(METRICS))
    if len(gt_values) != len(model_values):
        raise ValueError(f"{len(gt_values)} GT rows but {len(model_values)} model rows: they must pair")
    every = np.ones((1, len(gt_values)))
    point = _scored(_means(model_values, every), _means(gt_values, every), weights)
    draws = _draws(np.random.default_rng(seed), len(gt_values), resamples)
    sampled = _scored(_means(model_values, draws), _means(gt_values, draws), weights)
    out = {}
    for values, samples in zip(point[:2], sampled[:2]):
        out.update({name: (float(values[name][0]), _interval(samples[name], level)) for name in values})
    out["Final score"] = (float(point[2][0]), _interval(sampled[2], level))
    return out


def _scored(means: np.ndarray, gt: np.ndarray, weights: dict) -> tuple[dict, dict, np.ndarray]:
    """Normalised scores, groups and Final score of every resample (the leaderboard's functions)."""
    scores = {m: normalised(means[:, j], gt[..., j], m) for j, m in enumerate(METRICS)}
    return scores, group_scores(scores), final_score(scores, weights)


def bootstrap(values: dict, gt_name: str, weights: dict, ranked: list, items: dict | None = None,
              gt_fixed: dict | None = None, resamples: int = RESAMPLES, seed: int = SEED,
              level: float = LEVEL) -> Bootstrap:
    """values: model -> (videos, 8) raw values in METRICS order (the GT's under gt_name); ranked:
    the ranked models, best first; items: model -> each video's source item (for pairing);
    gt_fixed: the GT's values when they are a fixed row (the GT is then not resampled)."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    rng = np.random.default_rng(seed)
    values = {m: np.asarray(v, dtype=float).reshape(-1, len(METRICS)) for m, v in values.items()}
    result = Bootstrap(resamples, seed, level, gt_resampled=gt_fixed is None)
    result.single = [m for m, v in values.items() if len(v) == 1]
    if gt_fixed is None:
        gt_values = values[gt_name]
        gt = _means(gt_values, _draws(rng, len(gt_values), resamples))
        if len(gt_values) >= MIN_VIDEOS:
            result.rows[gt_name] = Intervals({m: _interval(gt[:, j], level) for j, m in enumerate(METRICS)},
                                             {}, {}, None)
    else:
        gt = np.array([float(gt_fixed[m]) for m in METRICS])
    finals = {}
    for model, v in values.items():
        if model == gt_name or len(v) < MIN_VIDEOS:
            continue
        means = _means(v, _draws(rng, len(v), resamples))
        scores, groups, finals[model] = _scored(means, gt, weights)
        result.rows[model] = Intervals(
            raw={m: _interval(means[:, j], level) for j, m in enumerate(METRICS)},
            normalised={m: _interval(s, level) for m, s in scores.items()},
            groups={g: _interval(s, level) for g, s in groups.items()},
            final=_interval(finals[model], level))
    for better, worse in zip(ranked, ranked[1:]):
        if better not in finals or worse not in finals:  # one video: nothing to say how far apart they are
            continue
        difference, paired = _difference(values, items or {}, better, worse, gt, weights, rng, resamples)
        if difference is None:
            difference = finals[better] - finals[worse]
        low, high = _interval(difference, level)
        result.comparisons.append(Comparison(better, worse, (low, high), paired, bool(low > 0 or high < 0)))
    return result


def _difference(values, items, better, worse, gt, weights, rng, resamples):
    """The Final-score differences over the items both models have, drawn together; (None, 0)
    when they share fewer than MIN_PAIRED."""
    a_items, b_items = items.get(better), items.get(worse)
    if a_items is None or b_items is None:
        return None, 0
    b_index = {item: i for i, item in enumerate(b_items)}
    shared = [(i, b_index[item]) for i, item in enumerate(a_items) if item in b_index]
    if len(shared) < MIN_PAIRED:
        return None, 0
    a_rows, b_rows = (np.array(rows) for rows in zip(*shared))
    draws = _draws(rng, len(shared), resamples)  # the same items drawn for both
    a = _scored(_means(values[better][a_rows], draws), gt, weights)[2]
    b = _scored(_means(values[worse][b_rows], draws), gt, weights)[2]
    return a - b, len(shared)
