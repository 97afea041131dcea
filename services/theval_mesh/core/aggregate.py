"""Per-model raw values: the mean over a model's videos, NaN values ignored, counts kept."""
import math

import numpy as np

from theval_mesh.core.compute import METRIC_KEYS
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.pure.scoring.final_score import RawRow
from theval_mesh.pure.scoring.names import NAME_OF_KEY


def model_rows(results: list[VideoResult], models: list[str]) -> list[RawRow]:
    rows = []
    for model in models:
        ok = [r for r in results if r.model == model and r.status == OK]
        values, counts = {}, {}
        for key in METRIC_KEYS:
            vals = [r.metrics.get(key, math.nan) for r in ok]
            vals = [v for v in vals if not math.isnan(v)]
            values[NAME_OF_KEY[key]] = float(np.mean(vals)) if vals else math.nan
            counts[NAME_OF_KEY[key]] = len(vals)
        rows.append(RawRow(model, values, counts, ok[0].provenance if ok else None))
    return rows
