"""pandas views of the API's results and leaderboards (pandas is optional: imported on use)."""
from typing import TYPE_CHECKING

from theval_mesh.core.results import VideoResult
from theval_mesh.pure.scoring.names import FINAL, GROUPS, METRICS
from theval_mesh.pure.scoring.names import KEYS as METRIC_KEYS
from theval_mesh.pure.scoring.tables import COUNT_PREFIX

if TYPE_CHECKING:
    import pandas as pd

CI_LOW, CI_HIGH = "ci_low:", "ci_high:"  # the bounds of each score's interval
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


def _bounds(row) -> dict:
    """ci_low:<name> and ci_high:<name> of the row's normalised scores, groups and Final score (NaN: none)."""
    intervals = {**row.normalised_ci, **row.groups_ci, **({FINAL: row.final_ci} if row.final_ci else {})}
    nan = float("nan")
    return {side + name: intervals.get(name, (nan, nan))[k] for name in (*METRICS, *GROUPS, FINAL)
            for k, side in enumerate((CI_LOW, CI_HIGH))}


def leaderboard_frame(rows) -> "pd.DataFrame":
    """One row per model, indexed by name, in leaderboard order: Rank, the 8 normalised scores, the
    3 groups and the Final score (leaderboard.csv's columns), then "raw:<metric>", "n:<metric>",
    and the bounds of each score's interval, "ci_low:<name>" and "ci_high:<name>"."""
    pd = pandas()
    data = [{"Rank": pd.NA if r.rank is None else r.rank, **r.normalised, **r.groups, FINAL: r.final,
             **{RAW_PREFIX + m: r.raw[m] for m in METRICS}, **{COUNT_PREFIX + m: r.counts.get(m, 0) for m in METRICS},
             **_bounds(r), "Note": "ground truth" if r.is_gt else r.note} for r in rows]
    scored = (*METRICS, *GROUPS, FINAL)
    columns = ["Rank", *scored, *(RAW_PREFIX + m for m in METRICS), *(COUNT_PREFIX + m for m in METRICS),
               *(side + name for name in scored for side in (CI_LOW, CI_HIGH)), "Note"]
    frame = pd.DataFrame(data, columns=columns, index=pd.Index([r.model for r in rows], name="Model"))
    frame["Rank"] = frame["Rank"].astype("Int64")
    return frame
