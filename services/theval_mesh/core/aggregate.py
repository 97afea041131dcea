"""Per-model raw values: the mean over a model's videos, NaN values ignored, counts kept; the
per-video values behind them (for the bootstrap); and the leaderboard of results with its
intervals, as every output computes it (files, the API, the evaluator's GetLeaderboard)."""
import math
from pathlib import PurePath

import numpy as np

from theval_mesh.core.results import OK, VideoResult
from theval_mesh.pure.metrics.registry import REGISTRY
from theval_mesh.pure.scoring.final_score import Leaderboard, RawRow, leaderboard
from theval_mesh.pure.scoring.uncertainty import bootstrap


def model_rows(results: list[VideoResult], models: list[str]) -> list[RawRow]:
    rows = []
    for model in models:
        ok = [r for r in results if r.model == model and r.status == OK]
        values, counts = {}, {}
        for metric in REGISTRY:
            vals = [r.metrics.get(metric.key, math.nan) for r in ok]
            vals = [v for v in vals if not math.isnan(v)]
            values[metric.name] = float(np.mean(vals)) if vals else math.nan
            counts[metric.name] = len(vals)
        rows.append(RawRow(model, values, counts, ok[0].provenance if ok else None))
    return rows


def per_video(results: list[VideoResult], models: list[str]) -> tuple[dict, dict]:
    """(values, items): model -> (videos, 8) raw values of its scored videos in REGISTRY order
    (NaN where a metric has none), and model -> each video's source item, its file name (a GT
    clip and the generated videos of its audio share it)."""
    values, items = {}, {}
    for model in models:
        ok = [r for r in results if r.model == model and r.status == OK]
        values[model] = np.array([[r.metrics.get(m.key, math.nan) for m in REGISTRY] for r in ok],
                                 dtype=float).reshape(len(ok), len(REGISTRY))
        items[model] = [PurePath(r.video).name for r in ok]
    return values, items


def ranked(results: list[VideoResult], names: list[str], gt_name: str, weights=None,
           gt_row: RawRow | None = None, rows: list[RawRow] | None = None, partial: bool = False) -> Leaderboard:
    """The leaderboard of `names` (the GT's first) with its bootstrap intervals. gt_row: a GT
    kept as a fixed row (a reference set's means), not resampled; else the GT's videos are among
    the results and resampled too. rows: the board's raw rows (as computed here), when the caller
    has them already. partial: a partial Final score when the GT cannot normalise a metric
    (pure.scoring.final_score.leaderboard)."""
    models = [n for n in names if gt_row is None or n != gt_name]
    if rows is None:
        rows = ([gt_row] if gt_row is not None else []) + model_rows(results, models)
    board = leaderboard(rows, gt_name=gt_name, weights=weights, partial=partial)
    values, items = per_video(results, models)
    board.uncertainty = bootstrap(values, gt_name, board.weights, [r.model for r in board.rows if r.rank is not None],
                                  items=items, gt_fixed=None if gt_row is None else gt_row.values)
    return board
