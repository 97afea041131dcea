"""pandas views of the API's results and leaderboards (pandas is optional: imported on use)."""
from typing import TYPE_CHECKING

from theval_mesh.core.results import VideoResult
from theval_mesh.pure.scoring.names import FINAL, GROUPS
from theval_mesh.pure.scoring.names import KEYS as METRIC_KEYS
from theval_mesh.pure.scoring.names import METRICS
from theval_mesh.pure.scoring.tables import COUNT_PREFIX

if TYPE_CHECKING:
    import pandas as pd

RAW_PREFIX = "raw:"  # raw-value columns "raw:<metric>" of the leaderboard, beside the "n:<metric>" counts
VIDEO_COLUMNS = ("frames_total", "frames_used", "face_frames", "fps", "width", "height", "seconds")


def pandas():
    try:
        import pandas
    except ImportError as err:
        raise ImportError("to_pandas() needs pandas, which is not installed: pip install pandas") from err
    return pandas


def results_frame(results: list[VideoResult]) -> "pd.DataFrame":
    """One row per video: model, video, status, reason, the raw value of each metric (by key, NaN
    where it has none), frame counts, size and time, as results.csv has them."""
    rows = [{"model": r.model, "video": r.video, "status": r.status, "reason": r.reason,
             **{k: r.metrics.get(k, float("nan")) for k in METRIC_KEYS},
             **{c: getattr(r, c) for c in VIDEO_COLUMNS}} for r in results]
    columns = ["model", "video", "status", "reason", *METRIC_KEYS, *VIDEO_COLUMNS]
    return pandas().DataFrame(rows, columns=columns)


def leaderboard_frame(rows) -> "pd.DataFrame":
    """One row per model, indexed by name, in leaderboard order: Rank, the 8 normalised scores, the
    3 groups and the Final score (leaderboard.csv's columns), then "raw:<metric>" and "n:<metric>"."""
    pd = pandas()
    data = [{"Rank": pd.NA if r.rank is None else r.rank, **r.normalised, **r.groups, FINAL: r.final,
             **{RAW_PREFIX + m: r.raw[m] for m in METRICS}, **{COUNT_PREFIX + m: r.counts.get(m, 0) for m in METRICS},
             "Note": "ground truth" if r.is_gt else r.note} for r in rows]
    columns = ["Rank", *METRICS, *GROUPS, FINAL, *(RAW_PREFIX + m for m in METRICS),
               *(COUNT_PREFIX + m for m in METRICS), "Note"]
    frame = pd.DataFrame(data, columns=columns, index=pd.Index([r.model for r in rows], name="Model"))
    frame["Rank"] = frame["Rank"].astype("Int64")
    return frame
