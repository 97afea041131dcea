"""`--log-to mlflow`: an evaluation as one MLflow run: its settings and provenance as parameters,
the leaderboard with every interval as metrics, and its files (results.json, the tables, the heat
map, the HTML report) as artefacts. Through MlflowClient, so no global MLflow state is left in the
process (the Python API may log several evaluations)."""
import json
import os
import re
import time
from pathlib import Path

from theval_mesh.outputs.html_report import REPORT
from theval_mesh.outputs.results_files import FILES
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.metrics.registry import REGISTRY

BATCH = 1000  # MLflow's limit of metrics per log_batch call
ARTEFACTS = ("results_json", "leaderboard_csv", "leaderboard_md", "leaderboard_tex", "leaderboard_groups_tex", "plot",
             "plot_svg", "results_csv")  # and the report


def tracking_uri(out: Path, uri: str | None = None) -> str:
    """The URI given, else $MLFLOW_TRACKING_URI, else a file store beside the results (out/mlruns)."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or (Path(out) / "mlruns").resolve().as_uri()


def _key(text: str) -> str:
    """An MLflow metric name: letters, digits and _-./ and spaces only."""
    return re.sub(r"[^\w\-./ ]", "_", text)


def leaderboard_metrics(doc: dict) -> dict[str, float]:
    """results.json's leaderboard as flat metrics: <model>/final, <model>/final.ci_low, ...,
    <model>/<group>, <model>/norm.<metric key>, <model>/raw.<metric key>; null values left out."""
    out = {}

    def put(name: str, figure: dict):
        if figure.get("value") is not None:
            out[name] = figure["value"]
        for side, bound in zip(("ci_low", "ci_high"), figure.get("ci") or ()):
            if bound is not None:
                out[f"{name}.{side}"] = bound
    for e in doc["leaderboard"]:
        model = _key(e["model"])
        put(f"{model}/final", e["final"])
        for group, figure in e["groups"].items():
            put(f"{model}/{group.lower()}", figure)
        for m in REGISTRY:
            put(f"{model}/norm.{m.key}", e["normalised"][m.name])
            put(f"{model}/raw.{m.key}", e["raw"][m.name])
        if e["rank"] is not None:
            out[f"{model}/rank"] = e["rank"]
    return out


def run_params(doc: dict) -> dict[str, str]:
    b = doc.get("bootstrap") or {}
    params = {f"settings.{k}": v for k, v in sorted(doc.get("settings", {}).items())}
    params.update({"gt": doc["gt"]["name"], "gt_source": doc["gt"].get("source") or "published",
                   "theval": doc.get("theval"), "proxy_quality": ", ".join(doc.get("proxy_quality", [])) or "none",
                   "bootstrap.resamples": b.get("resamples"), "bootstrap.seed": b.get("seed"),
                   "bootstrap.level": b.get("level"), "videos.scored": doc["counts"]["scored"],
                   "videos.failed": doc["counts"]["failed"]})
    for name, source in sorted((doc.get("models") or {}).items()):
        params[f"model.{name}"] = source
    return {k: str(v)[:6000] for k, v in params.items()}  # MLflow's limit on a parameter's value


def log_to_mlflow(out: Path, uri: str | None = None, experiment: str = "theval",
                  run_name: str | None = None) -> tuple[str, str]:
    """Log the evaluation whose files are in `out` (its HTML report too, when written); returns
    (tracking URI, run id)."""
    try:
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param
    except ImportError:
        raise UserError("--log-to mlflow needs the MLflow client: pip install 'theval-mesh[mlflow]'") from None
    uri = tracking_uri(out, uri)
    if uri.startswith("file:") or "://" not in uri:
        # MLflow 3 keeps its file store working but asks for this opt-in; a local file store is
        # what a researcher without a tracking server has.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    out = Path(out)
    doc = json.loads((out / FILES["results_json"]).read_text())
    try:
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(experiment)
        tags = {"theval.version": str(doc.get("theval")), "theval.job": str(doc.get("job")),
                "theval.proxy_quality": ", ".join(doc.get("proxy_quality", [])) or "none"}
        run = client.create_run(experiment_id, run_name=run_name or out.name, tags=tags)
        run_id = run.info.run_id
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, 0) for k, v in leaderboard_metrics(doc).items()]
        params = [Param(k, v) for k, v in run_params(doc).items()]
        client.log_batch(run_id, params=params[:100])
        for k in range(100, len(params), 100):
            client.log_batch(run_id, params=params[k:k + 100])
        for k in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[k:k + BATCH])
        for file in [FILES[name] for name in ARTEFACTS] + [REPORT]:
            if (out / file).is_file():
                client.log_artifact(run_id, str(out / file))
        client.set_terminated(run_id)
    except Exception as err:  # the results are on disk already; say why the log failed
        raise UserError(f"--log-to mlflow: could not log to {uri}: {err} (the results are in {out})") from err
    return uri, run_id
