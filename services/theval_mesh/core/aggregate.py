"""Per-model raw values: the mean over a model's videos, NaN values ignored, counts kept."""
import math

import numpy as np

from theval_mesh.core.results import OK, VideoResult
from theval_mesh.pure.metrics.registry import REGISTRY
from theval_mesh.pure.scoring.final_score import RawRow


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
