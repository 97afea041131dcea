"""evaluate(): score a GT set and models' videos, rank the models against the GT (what
`theval evaluate` runs, and what a notebook calls)."""
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from theval_mesh.api import dataframes
from theval_mesh.api.arguments import Models, model_pairs, run_settings
from theval_mesh.api.reports import MlflowRun, log_to_mlflow, write_report
from theval_mesh.core.inputs import plan
from theval_mesh.core.results import VideoResult
from theval_mesh.jobs import pipeline
from theval_mesh.jobs.progress import Progress, settings_changed
from theval_mesh.outputs import results_files
from theval_mesh.outputs.run_files import RESULTS_DB
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.inference import InferenceOptions
from theval_mesh.pure.scoring import tables
from theval_mesh.pure.scoring.final_score import Leaderboard
from theval_mesh.pure.settings import RunSettings
from theval_mesh.pure.workers import choose_workers, notice
from theval_mesh.stores import result_cache
from theval_mesh.stores.job_store import SqlJobStore

if TYPE_CHECKING:
    import pandas


@dataclass(frozen=True)
class LeaderboardRow:
    """One model (or the GT) against the GT; metric names as in docs/metrics.md ("Lip sync", ...)."""
    model: str
    rank: int | None              # None: the GT row, or a row whose Final score is NaN
    final: float                  # the Final score
    groups: dict[str, float]      # Quality, Naturalness, Synchronization: means of their metrics
    normalised: dict[str, float]  # 1 - |raw - GT| / |GT|, not clamped
    raw: dict[str, float]         # the mean over the model's videos (NaN: no video had the metric)
    counts: dict[str, int]        # videos behind each mean
    is_gt: bool = False
    note: str = ""                # why a Final score is missing, or which metrics were left out
    # 95 % bootstrap intervals over videos, (low, high) (pure.scoring.uncertainty; how: the
    # Evaluation's board.uncertainty); None / empty for the GT row.
    final_ci: tuple[float, float] | None = None
    groups_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    normalised_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    raw_ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __repr__(self) -> str:
        """Short, for a notebook: rank, model, Final score (its interval), groups; to_dict() has all."""
        ci = f" [{self.final_ci[0]:.4f}, {self.final_ci[1]:.4f}]" if self.final_ci else ""
        groups = ", ".join(f"{g}={v:.4f}" for g, v in self.groups.items())
        rank = "GT" if self.is_gt else self.rank
        return (f"LeaderboardRow(rank={rank!r}, model={self.model!r}, final={self.final:.4f}{ci}, {groups}"
                + (f", note={self.note!r}" if self.note else "") + ")")

    def to_dict(self) -> dict:
        """Every field as plain Python values (intervals as (low, high) tuples)."""
        return asdict(self)


@dataclass
class Evaluation:
    """What evaluate() returns: every video's result, the leaderboard, and the files written."""
    results: list[VideoResult] = field(repr=False)  # (a notebook shows the leaderboard, not every video)
    leaderboard: list[LeaderboardRow]  # GT first, then by rank, then unranked rows
    board: Leaderboard = field(repr=False)  # as scoring computed it: weights, GT values, warnings (the CLI prints it)
    paths: dict[str, Path]  # name -> file written under `out` (empty without `out`)
    mlflow: MlflowRun | None = None  # the run logged to, with log_to="mlflow"

    @property
    def warnings(self) -> list[str]:
        return self.board.warnings

    def to_latex(self, decimals: int = 3, groups_only: bool = False) -> str:
        """The leaderboard as a booktabs LaTeX table, what leaderboard.tex holds (with `out`,
        paths["leaderboard_tex"]; the plot as SVG: paths["plot_svg"]): each cell the mean and the
        half-width of its 95 % interval, the best model per column in bold, short column names
        with a legend row. groups_only: the three groups and the Final score, as
        leaderboard_groups.tex (one column of a two-column paper)."""
        scored = next((r for r in self.results if r.provenance), None)
        setup, proxies = results_files.setup_labels(scored.provenance if scored else None)
        return tables.leaderboard_latex(self.board, decimals, setup=setup, proxies=proxies, groups_only=groups_only)

    def to_pandas(self) -> tuple["pandas.DataFrame", "pandas.DataFrame"]:
        """(results, leaderboard) as pandas DataFrames: one row per video (raw metrics by key), and
        one row per model indexed by name (normalised scores, groups, Final score, "raw:<metric>",
        "n:<metric>"). ImportError when pandas is not installed."""
        return dataframes.results_frame(self.results), dataframes.leaderboard_frame(self.leaderboard)


def evaluate(gt: str | Path, models: Models, out: str | Path | None = None, *, settings: RunSettings | None = None,
             workers: int | str = "auto", gt_name: str = "GT", weights: Mapping[str, float] | str | None = None,
             weights_store: str | None = None, progress: bool = True, mesh: str | None = None,
             inline: bool | None = None, ray_address: str | None = None, partial_score: bool = False,
             allow_unpaired: bool = False, cache: bool | str | Path = True, log_to: str | None = None,
             mlflow_uri: str | None = None, mlflow_experiment: str = "theval", runtime: str = "auto",
             device: str = "auto", precision: str = "fp32", **options: Any) -> Evaluation:
    """Score the GT videos and each model's, then rank the models against the GT.

    gt and each model's path: a folder (searched recursively), one video, or a .txt list of paths.
    models: {name: path} or [(name, path), ...]. Run settings: `settings`, or its fields as
    keywords (profile="paper", quality="proxy", frame_stride=2, single_pass=True, ...).

    The run is a job in <out>/results.sqlite with every output file beside it; run again with the
    same `out`, it skips the videos already scored with these settings. Without `out` it runs in
    a temporary folder, removed before returning: nothing is written, nothing resumes.

    workers: a number, or "auto" (pure.workers.choose_workers: one worker on fewer than 4 cores
    unless 64 videos or more, else up to 4; with `progress` the choice and why go to stderr when
    it matters: 16 videos or more, or more than one worker).
    Runs in this process with one worker (inline=None chooses it when workers == 1 and no
    `ray_address`: a local Ray's start costs more than it gives one worker), else on Ray
    (`workers` actors, each loading the models once; a local Ray unless `ray_address`) or as
    `inline` says. cache: a video whose bytes were scored before with the same settings, backends
    and tool version is not scored again but reused from the result cache (True: $THEVAL_CACHE or
    ~/.cache/theval/results-cache.sqlite; a file or postgresql:// URL; False: every video scored). mesh: HOST:PORT of an evaluator that scores
    the videos instead of in-process models (its allowed roots must hold them). weights:
    Final-score weights ({"Lip sync": 2}, or the --weights text). progress: a progress bar and a
    line per failed video on stderr. A video that cannot be scored is a failed result with its
    reason; a problem that stops the whole run (missing weights for quality="paper", a mesh that
    does not answer) is a UserError. A GT whose headers show it cannot normalise a metric (no
    audio track on any GT video) is an InputsRefused before anything is scored, unless
    partial_score=True: a Final score over the other metrics, labelled partial everywhere. Before
    that, an input with nothing to score, or a model none of whose videos has a GT video's file
    name (unless allow_unpaired), is an InputsRefused.
    When the videos were scored but no leaderboard can be formed (no GT video scored, a GT metric
    zero or NaN), the per-video files are written and NotRanked is raised, its `results` holding
    every video's result.

    runtime, device, precision: how the networks (paper quality, FaceXFormer) run in process:
    runtime "auto" (the fastest measured on the device), "torch", "onnxruntime", "openvino";
    device "auto" (a GPU when there is one), "cpu", "cuda", "cuda:N" (UsageRefused, before any
    work, when it is not there); precision "fp32", or "fp16"/"bf16" on torch (other numbers,
    labelled, and refused beside fp32 results).

    log_to="mlflow": also write the HTML report into `out` and log the evaluation as one MLflow run
    (mlflow_uri: the tracking URI, default $MLFLOW_TRACKING_URI, else OUT/mlruns) in experiment
    `mlflow_experiment`; needs `out`.
    """
    if log_to not in (None, "mlflow"):
        raise UserError(f"log_to={log_to!r}: the only destination is 'mlflow'")
    if log_to and out is None:
        raise UserError("log_to='mlflow' logs the files of a results folder: give `out` too")
    settings = run_settings(settings, options)
    pairs = model_pairs(models)
    run = dict(settings=settings, workers=workers, gt_name=gt_name, weights=weights, partial_score=partial_score,
               allow_unpaired=allow_unpaired,
               weights_store=weights_store, cache=result_cache.location(cache),
               inference=InferenceOptions(runtime, device, precision).to_dict(),
               progress=progress, mesh=mesh, ray_address=ray_address, inline=inline)
    if out is not None:
        evaluation = _evaluate(str(gt), pairs, Path(out), **run)
        if log_to:
            evaluation.paths["report"] = write_report(out, progress=progress)
            evaluation.mlflow = log_to_mlflow(out, mlflow_uri, mlflow_experiment)
        return evaluation
    with tempfile.TemporaryDirectory(prefix="theval-") as tmp:
        evaluation = _evaluate(str(gt), pairs, Path(tmp), **run)
    evaluation.paths = {}
    return evaluation


def _evaluate(gt: str, models: list[tuple[str, str]], out: Path, settings: RunSettings, workers: int | str,
              gt_name: str, weights, partial_score: bool, allow_unpaired: bool, weights_store, cache: str | None,
              progress: bool, mesh: str | None, inline: bool | None,
              ray_address: str | None, inference: dict) -> Evaluation:
    inputs = [(gt_name, gt)] + models
    items = plan(inputs)
    workers, why = choose_workers(workers, len(items), os.cpu_count() or 1)
    line = notice(workers, why, len(items))
    if line and progress:
        print(line, file=sys.stderr)
    if inline is None:
        inline = workers == 1 and ray_address is None
    # Missing weights or a mesh that does not answer stop the run here, with one clear line.
    # Inputs with nothing to score, models that pair with no GT video and a GT that cannot normalise a
    # metric stop here too, before any model loads.
    spec = pipeline.new_spec(inputs, settings, quiet=not progress, items=items, allow_unpaired=allow_unpaired,
                             gt_name=gt_name, workers=workers,
                             weights_store=weights_store, mesh=mesh, weights=weights, ray_address=ray_address,
                             partial_score=partial_score, cache=cache, inference=inference)
    out.mkdir(parents=True, exist_ok=True)
    db = out / RESULTS_DB
    if db.is_symlink():  # SQLite would write through it, to a file outside the folder
        raise UserError(f"{db} is a symbolic link; a results folder keeps its own store: remove the link or "
                        "choose another --out")
    store = SqlJobStore(db)
    try:
        for line in settings_changed(store.scored_otherwise(items, spec.settings_key()), spec.settings):
            if progress:
                print(line, file=sys.stderr)
        job = store.create(spec, items)
        shown = Progress(job, enabled=progress, frames=inline)
        try:
            # new_spec checked the spec a moment ago: the runners do not check it again.
            if inline:
                job = pipeline.run_inline(store, job.id, on_result=shown, on_frames=shown.frame, checked=True)
            else:
                job = pipeline.run_ray(store, job.id, workers, ray_address, on_result=shown, checked=True)
        finally:
            shown.close()
        if job.state != "done":
            raise UserError(f"the run stopped ({job.state}): {job.error}; run the same command again to resume")
        written = results_files.write_results(out, store, job)
    finally:
        store.close()
    paths = {**written.paths, "results_db": out / RESULTS_DB}
    return Evaluation(results=written.results, leaderboard=_rows(written.board, written.rows), board=written.board,
                      paths=paths)


def _rows(board: Leaderboard, raw_rows) -> list[LeaderboardRow]:
    raw = {row.model: row for row in raw_rows}
    rows = []
    for r in board.rows:
        ci = board.uncertainty.rows.get(r.model) if board.uncertainty else None
        rows.append(LeaderboardRow(
            model=r.model, rank=r.rank, final=r.final, groups=dict(r.groups), normalised=dict(r.scores),
            raw=dict(raw[r.model].values), counts=dict(r.counts or {}), is_gt=r.is_gt, note=r.note,
            final_ci=ci.final if ci else None, groups_ci=dict(ci.groups) if ci else {},
            normalised_ci=dict(ci.normalised) if ci else {}, raw_ci=dict(ci.raw) if ci else {}))
    return rows
