"""`--log-to mlflow` for real: the MLflow client writes to a local file store; the run read back
holds the leaderboard with its intervals as metrics, the settings as parameters, and the files
(with the HTML report) as artefacts. The evaluation is the kit's, resumed (nothing is scored again)."""
import json
import shutil
from pathlib import Path

import pytest

from theval_mesh.commands.cli import main

pytestmark = pytest.mark.slow  # the kit's evaluation (shared), then a resume and the report


def command(kit, out, *extra):
    models = [a for v in kit.variants for a in ("--model", f"{v}={Path(kit.out_dir) / v}")]
    return ["evaluate", "--gt", str(Path(kit.out_dir) / "gt"), *models, "--out", str(out), "--quality", "proxy",
            "--inline", "--quiet", *extra]


def test_an_evaluation_is_logged_as_one_mlflow_run(kit, evaluated_dir, tmp_path, capsys):
    from mlflow import MlflowClient
    out = tmp_path / "results"
    shutil.copytree(evaluated_dir, out)
    store = (tmp_path / "mlruns").as_uri()
    assert main(command(kit, out, "--log-to", "mlflow", "--mlflow-uri", store, "--mlflow-experiment", "kit")) == 0
    assert "logged to MLflow" in capsys.readouterr().err

    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([client.get_experiment_by_name("kit").experiment_id])
    assert run.info.status == "FINISHED"
    doc = json.loads((out / "results.json").read_text())
    metrics, params = run.data.metrics, run.data.params
    for entry in doc["leaderboard"]:
        final = entry["final"]
        assert metrics[f"{entry['model']}/final"] == pytest.approx(final["value"])
        if final["ci"]:
            assert (metrics[f"{entry['model']}/final.ci_low"], metrics[f"{entry['model']}/final.ci_high"]) == \
                pytest.approx(tuple(final["ci"]))
        assert metrics[f"{entry['model']}/norm.lip_sync"] == pytest.approx(entry["normalised"]["Lip sync"]["value"])
    assert params["settings.profile"] == doc["settings"]["profile"]
    assert params["bootstrap.resamples"] == str(doc["bootstrap"]["resamples"])
    assert params["proxy_quality"] == ", ".join(doc["proxy_quality"])
    assert run.data.tags["theval.proxy_quality"] != "none"

    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"results.json", "leaderboard.csv", "leaderboard.png", "report.html"} <= names
    logged = Path(client.download_artifacts(run.info.run_id, "results.json", str(tmp_path / "back")))
    assert json.loads(logged.read_text()) == doc


def test_a_store_that_cannot_be_written_is_a_clear_error_and_keeps_the_results(kit, evaluated_dir, tmp_path,
                                                                              capsys):
    out = tmp_path / "results"
    shutil.copytree(evaluated_dir, out)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the store would go")
    assert main(command(kit, out, "--log-to", "mlflow", "--mlflow-uri", (blocked / "mlruns").as_uri())) == 1
    err = capsys.readouterr().err
    assert "--log-to mlflow: could not log to" in err and str(out) in err
    assert (out / "results.json").is_file() and (out / "report.html").is_file()


def test_the_python_api_logs_the_same_run(kit, evaluated_dir, tmp_path):
    """evaluate(log_to="mlflow") writes the report and logs, as the command does; the run is found
    by the id it returns."""
    from mlflow import MlflowClient

    from theval_mesh import evaluate
    out = tmp_path / "results"
    shutil.copytree(evaluated_dir, out)
    store = (tmp_path / "mlruns").as_uri()
    models = {v: Path(kit.out_dir) / v for v in kit.variants}
    evaluation = evaluate(Path(kit.out_dir) / "gt", models, out, quality="proxy", inline=True, progress=False,
                          log_to="mlflow", mlflow_uri=store, mlflow_experiment="api")
    assert evaluation.mlflow.uri == store and evaluation.paths["report"] == out / "report.html"
    run = MlflowClient(tracking_uri=store).get_run(evaluation.mlflow.run_id)
    best = next(row for row in evaluation.leaderboard if row.rank == 1)
    assert run.data.metrics[f"{best.model}/final"] == pytest.approx(best.final)
    assert "report.html" in {a.path for a in MlflowClient(tracking_uri=store).list_artifacts(run.info.run_id)}


def test_the_python_api_refuses_mlflow_without_a_results_folder(tmp_path):
    from theval_mesh import evaluate
    from theval_mesh.pure.errors import UserError
    with pytest.raises(UserError, match="give `out`"):
        evaluate(tmp_path, {}, log_to="mlflow")
    with pytest.raises(UserError, match="only destination"):
        evaluate(tmp_path, {}, tmp_path / "out", log_to="wandb")
