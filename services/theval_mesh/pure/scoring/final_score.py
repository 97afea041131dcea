"""THEval Final score: normalise each metric by the GT value, average, rank (docs/metrics.md, "Final Score").

Decisions:
- A model metric that is NaN (no video gave a value) gets a NaN normalised score; its group and
  Final score are NaN too (never averaged over fewer metrics), the row is unranked, listed last,
  with a note. Giving that metric weight 0 ranks the row without it, explicitly.
- The GT row is kept in the board (it scores 1.0 everywhere) but is not ranked: ranks are among
  the models, as in the published leaderboard.
- Group scores are unweighted means of their members; weights only change the Final score.
- A GT that is zero or NaN on a metric cannot normalise it: refused, unless a partial Final score
  is asked for (off by default), which leaves such metrics out, says so on every output, and is
  never comparable with a full THEval Final score.
"""
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from theval_mesh.pure.metrics.registry import GLOBAL_AESTHETIC, LIP_SYNC
from theval_mesh.pure.scoring.compat import PUBLISHED_GT_WARNING, check_compatible, is_published
from theval_mesh.pure.scoring.errors import IncompatibleBackends, ScoringError
from theval_mesh.pure.scoring.names import GROUPS, METRICS, canonical_metric

GT_EPSILON = 1e-9  # |GT| at or below this is "zero" (same threshold as the reference code)
RANK_DECIMALS = 12  # finals equal to this many decimals are ties (float noise is not a ranking)
WEIGHTS_EXAMPLE = f"{GLOBAL_AESTHETIC.name}=2,{LIP_SYNC.name}=0"  # for help texts and errors


@dataclass(frozen=True)
class RawRow:
    """One model's (or the GT's) raw metric values: the mean over its videos."""
    model: str
    values: dict  # canonical metric name -> float (NaN: no video had the metric)
    counts: dict | None = None  # canonical metric name -> number of videos behind the mean
    provenance: dict | None = None


@dataclass
class ScoredRow:
    model: str
    scores: dict  # canonical metric name -> normalised score
    groups: dict  # "Quality" / "Naturalness" / "Synchronization" -> mean of members
    final: float
    rank: int | None  # None for the GT row and for rows whose Final score is NaN
    counts: dict | None = None
    is_gt: bool = False
    note: str = ""


@dataclass
class Leaderboard:
    rows: list  # GT first, then by rank, then unranked rows
    gt_name: str
    gt_values: dict
    weights: dict
    warnings: list = field(default_factory=list)
    uncertainty: object = None  # pure.scoring.uncertainty.Bootstrap, where per-video values were known
    left_out: list = field(default_factory=list)  # metrics a partial Final score leaves out (the GT cannot normalise)

    def row(self, model: str) -> ScoredRow:
        for r in self.rows:
            if r.model == model:
                return r
        raise KeyError(model)


def _bad_gt(value) -> bool:
    value = float(value)
    return math.isnan(value) or abs(value) <= GT_EPSILON


def normalised(value, gt, metric: str = "metric"):
    """1 - |x - g| / |g|, not clamped (it can go below 0). NaN value -> NaN. Element-wise on
    numpy arrays (the bootstrap's resamples; a resampled GT is not checked for zero)."""
    if isinstance(value, np.ndarray) or isinstance(gt, np.ndarray):
        return 1.0 - np.abs(value - gt) / np.abs(gt)
    if _bad_gt(gt):
        raise ScoringError(f"GT value of {metric} is {float(gt)!r}: THEval divides by it, so it "
                           "must be a non-zero number")
    return 1.0 - abs(float(value) - float(gt)) / abs(float(gt))


def group_scores(scores: Mapping) -> dict:
    return {g: sum(scores[m] for m in members) / len(members) for g, members in GROUPS.items()}


def final_score(scores: Mapping, weights: Mapping | None = None) -> float:
    """Mean of the 8 normalised scores, or their weighted mean (metrics with weight 0 left out)."""
    weights = weights or dict.fromkeys(METRICS, 1.0)
    used = [m for m in METRICS if weights[m] > 0]
    return sum(weights[m] * scores[m] for m in used) / sum(weights[m] for m in used)


def video_scores(values: Mapping, gt_values: Mapping, weights: Mapping, left_out=()) -> tuple[dict, float]:
    """One video's normalised scores against the GT means, and its Final score (NaN when a
    weighted metric is NaN): per-video figures, scored as a model's means are. left_out: the
    metrics of a partial Final score (NaN scores)."""
    scores = {m: math.nan if m in left_out else normalised(values.get(m, math.nan), gt_values[m], m)
              for m in METRICS}
    return scores, final_score(scores, weights)


def parse_weights(spec=None, files: bool = True) -> dict:
    """Per-metric weights from a mapping, JSON object text, JSON file path, or "Metric=2,Other=0".

    Names may be aliases; unspecified metrics weigh 1. Unknown names, negative or non-finite
    weights, and all-zero weights are errors. files=False: text from a remote caller, never read
    as a path on this machine.
    """
    if spec is None:
        given = {}
    elif isinstance(spec, Mapping):
        given = dict(spec)
    else:
        text = str(spec).strip()
        if text.startswith("{"):
            given = _json_object(text, "weights")
        elif files and (text.lower().endswith(".json") or os.path.isfile(text)):
            try:
                with open(text, encoding="utf-8") as f:
                    given = _json_object(f.read(), text)
            except OSError as err:
                raise ScoringError(f"cannot read weights file {text}: {err.strerror}") from None
        else:
            given = {}
            for item in filter(None, (part.strip() for part in text.split(","))):
                name, sep, weight = item.partition("=")
                if not sep:
                    raise ScoringError(f"weights: {item!r} is not Metric=weight "
                                       f"(e.g. \"{WEIGHTS_EXAMPLE}\")")
                given[name.strip()] = weight.strip()

    weights = dict.fromkeys(METRICS, 1.0)
    unknown, seen = [], set()
    for name, weight in given.items():
        metric = canonical_metric(name)
        if metric is None:
            unknown.append(str(name))
            continue
        if metric in seen:
            raise ScoringError(f"weights: {metric} is given twice")
        seen.add(metric)
        try:
            weight = float(weight)
        except (TypeError, ValueError):
            raise ScoringError(f"weights: {name}={weight!r} is not a number") from None
        if not math.isfinite(weight) or weight < 0:
            raise ScoringError(f"weights: {name}={weight} must be a finite number >= 0")
        weights[metric] = weight
    if unknown:
        raise ScoringError(f"weights: unknown metric(s) {', '.join(map(repr, unknown))}; "
                           f"use one of: {', '.join(METRICS)}")
    if sum(weights.values()) <= 0:
        raise ScoringError("weights: all weights are 0, so there is nothing to average")
    return weights


def _json_object(text: str, source: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ScoringError(f"weights ({source}): invalid JSON: {err}") from None
    if not isinstance(value, dict):
        raise ScoringError(f"weights ({source}): expected a JSON object {{\"Metric\": weight}}")
    return value


def _canonical_values(row: RawRow) -> dict:
    values = {}
    for name, value in row.values.items():
        metric = canonical_metric(name)
        if metric is None:
            raise ScoringError(f"row {row.model!r}: {name!r} is not a THEval metric")
        values[metric] = float(value)
    missing = [m for m in METRICS if m not in values]
    if missing:
        raise ScoringError(f"row {row.model!r} has no value for: {', '.join(missing)}")
    return values


def partial_warning(left_out) -> str:
    """What every output of a partial Final score says."""
    return (f"PARTIAL Final score over {len(METRICS) - len(left_out)} of {len(METRICS)} metrics: "
            f"{', '.join(left_out)} left out (the GT is zero or NaN on them, so they cannot be normalised); "
            "NOT comparable with a full THEval Final score")


def leaderboard(rows, gt_name: str = "GT", weights=None, allow_mixed: bool = False,
                partial: bool = False) -> Leaderboard:
    """Score every row against the row named `gt_name`; rank the models by Final score.

    When both the GT and a model carry provenance they must have been scored the same way
    (check_compatible); allow_mixed=True turns a refusal into a loud warning on the result.
    partial=True: a metric the GT cannot normalise (zero or NaN) is left out of the Final score
    (weight 0, NaN scores) instead of refusing the board; Leaderboard.left_out names them.
    """
    rows = list(rows)
    names = [r.model for r in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScoringError(f"model name(s) appear more than once: {', '.join(duplicates)}")
    if gt_name not in names:
        raise ScoringError(f"no GT row named {gt_name!r} (rows: {', '.join(names) or 'none'}); "
                           "pick it with --gt-name or use --gt-published")
    gt = rows[names.index(gt_name)]
    gt_values = _canonical_values(gt)
    bad = [m for m in METRICS if _bad_gt(gt_values[m])]
    if bad and not partial:
        raise ScoringError(
            f"GT row {gt_name!r} is zero or missing (NaN) for: {', '.join(bad)}; THEval divides "
            "each metric by its GT value, so these cannot be normalised (a partial Final score over the "
            "other metrics: --partial-score)")
    if len(bad) == len(METRICS):
        raise ScoringError(f"GT row {gt_name!r} is zero or missing (NaN) for every metric: nothing to normalise")
    weights = {**parse_weights(weights), **dict.fromkeys(bad, 0.0)}
    if sum(weights.values()) <= 0:
        raise ScoringError(f"every weighted metric is left out of the partial Final score ({', '.join(bad)})")

    warnings = [PUBLISHED_GT_WARNING] if is_published(gt.provenance) else []
    if bad:
        warnings.append(partial_warning(bad))
    unchecked = []
    scored = []
    for row in rows:
        values = _canonical_values(row)
        if row is not gt:
            if gt.provenance and row.provenance:
                warnings += _compatibility(gt.provenance, row, allow_mixed)
            elif gt.provenance or row.provenance:
                unchecked.append(row.model)
        scores = {m: math.nan if m in bad else normalised(values[m], gt_values[m], m) for m in METRICS}
        scored.append(ScoredRow(
            model=row.model, scores=scores, groups=group_scores(scores),
            final=final_score(scores, weights), rank=None,
            counts=dict(row.counts) if row.counts is not None else None,
            is_gt=row is gt, note="; ".join(filter(None, [_note(scores, weights, bad), _left_out_note(bad),
                                                          below_zero_note(scores, weights)]))))
    if unchecked and not is_published(gt.provenance):
        warnings.append(f"no provenance on both GT and {', '.join(unchecked)}: could not check "
                        "that they were scored with the same profile and backends")

    ranked = [r for r in scored if not r.is_gt and not math.isnan(r.final)]
    ranked.sort(key=lambda r: -r.final)  # stable: ties keep the input order
    keys = [round(r.final, RANK_DECIMALS) for r in ranked]
    for r, key in zip(ranked, keys):
        r.rank = 1 + sum(k > key for k in keys)  # "min" method: ties share the lower rank
    unranked = [r for r in scored if not r.is_gt and math.isnan(r.final)]
    gt_row = [r for r in scored if r.is_gt]
    return Leaderboard(rows=gt_row + ranked + unranked, gt_name=gt_name, gt_values=gt_values,
                       weights=weights, warnings=warnings, left_out=bad)


def _compatibility(gt_provenance, row: RawRow, allow_mixed: bool) -> list[str]:
    try:
        return check_compatible(gt_provenance, row.provenance, row.model)
    except IncompatibleBackends as err:
        if not allow_mixed:
            raise
        return [(f"MIXED BACKENDS (allowed by --allow-mixed): {row.model!r} was not scored like "
                 f"the GT, its normalised scores are NOT comparable: "
                 f"{'; '.join(err.differences)}")]


def _left_out_note(left_out) -> str:
    return f"partial Final score: {', '.join(left_out)} left out" if left_out else ""


def below_zero_driver(scores: dict, weights: dict) -> str | None:
    """For a Final score below 0, the metric that pulls it down most (the scores are not clamped:
    a raw mean further from the GT's than the GT's own value scores below 0); else None."""
    if not final_score(scores, weights) < 0:
        return None
    return min((m for m in METRICS if weights[m] > 0 and not math.isnan(scores[m])),
               key=lambda m: weights[m] * scores[m])


def below_zero_note(scores: dict, weights: dict) -> str:
    metric = below_zero_driver(scores, weights)
    if metric is None:
        return ""
    return (f"Final score below 0, driven by {metric}: {scores[metric]:.2f} (its raw mean is "
            f"{1 - scores[metric]:.0%} of the GT's value away from it)")


def _note(scores: dict, weights: dict, left_out=()) -> str:
    missing = [m for m in METRICS if math.isnan(scores[m]) and m not in left_out]
    if not missing:
        return ""
    counted = [m for m in missing if weights[m] > 0]
    if counted:
        return (f"no video gave a value for {', '.join(counted)}: Final score not computed "
                "(give those metrics weight 0 to rank without them)")
    return f"no video gave a value for {', '.join(missing)} (weight 0: left out of the Final score)"
