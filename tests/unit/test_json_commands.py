"""`--json` of `theval bulk status|list` and `theval weights status|verify`: one JSON document on
stdout that a script can read, with what the text shows."""
import json

from theval_mesh.commands.cli import main
from theval_mesh.core.inputs import Item
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.job_store import JobSpec, SqlJobStore


def test_bulk_status_and_list_as_json(tmp_path, capsys):
    path = tmp_path / "jobs.sqlite"
    store = SqlJobStore(path)
    job = store.create(JobSpec(inputs=[["GT", "gt/"], ["m", "m/"]], settings=RunSettings(quality="proxy").key()),
                       [Item("GT", "gt/a.mp4"), Item("m", "m/a.mp4")])
    store.close()
    assert main(["bulk", "status", job.id, "--store", str(path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["id"], status["state"], status["total"], status["remaining"]) == (job.id, "queued", 2, 2)
    assert status["inputs"] == {"GT": "gt/", "m": "m/"} and status["eta_s"] is None
    assert main(["bulk", "list", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [status]


def test_weights_status_and_verify_as_json(tmp_path, capsys):
    assert main(["weights", "status", "--store", str(tmp_path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["store"] == str(tmp_path) and status["files"] and not any(f["present"] for f in status["files"])
    assert all(h.startswith("missing: download ") for h in status["hints"])
    assert main(["weights", "verify", "--store", str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False
    assert main(["weights", "verify", "--store", str(tmp_path), "--json", "--allow-missing"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
