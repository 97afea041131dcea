"""The HTML report and the MLflow run of a results folder (what `theval evaluate --out` or
`theval bulk results --out` wrote): what `theval report` and `--log-to mlflow` run."""
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.outputs.html_report import THUMBNAILS_PER_MODEL, build_report  # plotly: when a report is built


@dataclass(frozen=True)
class MlflowRun:
    uri: str         # the tracking URI logged to
    experiment: str
    run_id: str


def write_report(results_dir: str | Path, out: str | Path | None = None, *,
                 thumbnails: int | None = THUMBNAILS_PER_MODEL, progress: bool = True, published: bool = False,
                 title: str | None = None) -> Path:
    """Write one self-contained HTML report of the results in `results_dir`; returns its path
    (default RESULTS_DIR/report.html). thumbnails: videos per model with worst-frame thumbnails,
    read from the video files (None: every video; 0: none). published: offer the published
    leaderboard even beside results scored otherwise than the published figures (labelled so; by
    default it is left out of such a report). title: the page's title and heading (default
    "THEval report: <folder name>"). Needs the `report` extra (plotly)."""
    return build_report(results_dir, out, thumbnails, progress=progress, published=published, title=title)


def log_to_mlflow(results_dir: str | Path, uri: str | None = None, experiment: str = "theval") -> MlflowRun:
    """Log the evaluation in `results_dir` as one MLflow run: settings and provenance as
    parameters, the leaderboard with its intervals as metrics, its files (and its HTML report, when
    write_report wrote one there) as artefacts. uri: the tracking URI (default
    $MLFLOW_TRACKING_URI, else RESULTS_DIR/mlruns). Needs the `mlflow` extra."""
    from theval_mesh.outputs.mlflow_log import log_to_mlflow as log
    tracking, run_id = log(Path(results_dir), uri, experiment)
    return MlflowRun(tracking, experiment, run_id)
