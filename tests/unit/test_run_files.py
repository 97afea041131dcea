"""A results folder's files are one run's: results.json, written last, names the run and each file
it wrote (sha256, rows); `theval report`, `align` and `score` refuse a folder whose files disagree
(a second run into the same --out killed between two files, a results.jsonl cut at a line) in one
line that says how to write the files again, and read older folders as before."""
import json

import pytest

from tests.support.results_schema import validate_results
from tests.unit.test_results_document import evaluation, results
from theval_mesh.commands.score import score_file
from theval_mesh.outputs import results_files
from theval_mesh.outputs.html_report import build_report
from theval_mesh.outputs.run_files import RUN, check_folder
from theval_mesh.pure.errors import UserError
from theval_mesh.studies.alignment_files import read_scores
from theval_mesh.studies.classic_metrics import _add_to_results_json


def readers(folder):
    """Each command's way into the folder."""
    return {"report": lambda: build_report(folder, folder / "report.html", thumbnails=0, progress=False),
            "align": lambda: read_scores(folder),
            "score": lambda: score_file(folder / "raw_metrics.csv")}


def test_results_json_names_the_run_and_each_file_it_wrote(tmp_path):
    res, _, paths = evaluation(tmp_path)
    document = json.loads(paths["results_json"].read_text())
    validate_results(document)
    run = document[RUN]
    assert len(run["id"]) == 32
    assert set(run["files"]) == {p.name for name, p in paths.items() if name != "results_json"}
    assert run["files"]["results.jsonl"]["rows"] == run["files"]["results.csv"]["rows"] == len(res)
    assert run["files"]["raw_metrics.csv"]["rows"] == 3  # GT, near, far
    assert "rows" not in run["files"]["leaderboard.png"]
    for read in readers(tmp_path).values():
        read()  # a whole run is read
    _, _, paths = evaluation(tmp_path)  # the same files written again: another run
    assert json.loads(paths["results_json"].read_text())[RUN]["id"] != run["id"]


def second_run_killed_after_the_per_video_files(folder):
    """What a second `theval evaluate` into the same --out leaves when it is killed after
    results.jsonl and results.csv: other results there, results.json still the first run's."""
    fewer = [r for r in results(seed=1) if r.model != "far"]
    results_files._write_per_video(folder, fewer, None)
    return len(fewer)


@pytest.mark.parametrize("reader", ["report", "align", "score"])
def test_a_run_killed_between_its_files_is_refused_naming_the_fix(tmp_path, reader):
    res, _, _ = evaluation(tmp_path)
    rows = second_run_killed_after_the_per_video_files(tmp_path)
    with pytest.raises(UserError) as err:
        readers(tmp_path)[reader]()
    message = str(err.value)
    assert "\n" not in message and str(tmp_path) in message
    wrote = f"{rows} rows, it wrote {len(res)}"
    assert f"wrote: results.csv ({wrote}), results.jsonl ({wrote}). A run into this folder stopped" in message
    assert "the same `theval evaluate` with this --out" in message
    (tmp_path / "results.sqlite").touch()  # evaluate's store beside them: the files come back from it
    with pytest.raises(UserError, match=rf"theval bulk results job-1 --store {tmp_path}/results.sqlite --out {tmp_path}$"):
        readers(tmp_path)[reader]()


def test_a_results_jsonl_cut_at_a_line_boundary_is_refused(tmp_path):
    evaluation(tmp_path)
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:5]))
    with pytest.raises(UserError, match=rf"wrote: results.jsonl \(5 rows, it wrote {len(lines)}\)\. "):
        check_folder(tmp_path)
    path.unlink()
    with pytest.raises(UserError, match=r"wrote: results.jsonl \(missing\)\."):
        check_folder(tmp_path)


def test_what_later_commands_add_to_results_json_keeps_the_folder_whole(tmp_path):
    _, _, paths = evaluation(tmp_path)
    _add_to_results_json(paths["results_json"], {"schema": "theval-classic/1", "summary": []})
    assert "classic" in json.loads(paths["results_json"].read_text())
    check_folder(tmp_path)


def test_a_classic_block_written_under_its_earlier_name_is_reported_and_then_replaced(tmp_path):
    _, _, paths = evaluation(tmp_path)
    document = json.loads(paths["results_json"].read_text())
    document["legacy"] = {"schema": "theval-legacy/1", "summary": [{"Model": "old", "LSE-C": 6.5}], "notes": [],
                          "provenance": {}, "skipped": [], "bootstrap": {}}
    paths["results_json"].write_text(json.dumps(document))
    build_report(tmp_path, tmp_path / "report.html", thumbnails=0, progress=False)
    assert 'id="classic-section"' in (tmp_path / "report.html").read_text()
    _add_to_results_json(paths["results_json"], {"schema": "theval-classic/1", "summary": []})
    assert "legacy" not in json.loads(paths["results_json"].read_text())


def test_a_folder_written_before_the_run_block_and_a_csv_elsewhere_are_read_as_before(tmp_path):
    _, _, paths = evaluation(tmp_path)
    document = json.loads(paths["results_json"].read_text())
    del document[RUN]
    paths["results_json"].write_text(json.dumps(document))
    (tmp_path / "results.jsonl").write_text("")  # would disagree, but nothing says what the run wrote
    check_folder(tmp_path)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "raw.csv").write_text((tmp_path / "raw_metrics.csv").read_text())
    (other / "results.json").write_text(json.dumps({RUN: {"id": "x", "files": {"gone.csv": {"sha256": "0" * 64}}}}))
    score_file(other / "raw.csv")  # not a file of that run: read as any CSV

