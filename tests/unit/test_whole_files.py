"""A results folder's files are written whole, under a new name renamed onto them: a link planted
in the folder is replaced, never followed (its target outside is left alone), a write that fails
leaves the old file, and nothing of the temporary names stays behind."""
import pytest

from tests.support.video_files import gradient, tone, write_video
from tests.unit.test_results_document import evaluation
from theval_mesh import evaluate
from theval_mesh.outputs import html_report, results_files
from theval_mesh.outputs.run_files import RESULTS_DB
from theval_mesh.outputs.whole_files import replacing, write_text
from theval_mesh.pure.errors import UserError


def test_links_planted_in_the_folder_are_replaced_and_their_targets_left_alone(tmp_path):
    outside, folder = tmp_path / "outside", tmp_path / "out"
    outside.mkdir()
    folder.mkdir()
    for name in [*results_files.FILES.values(), html_report.REPORT]:
        (outside / name).write_text("precious")
        (folder / name).symlink_to(outside / name)
    res, board, paths = evaluation(folder)
    html_report.build_report(folder, thumbnails=0)
    for name in [*results_files.FILES.values(), html_report.REPORT]:
        assert (outside / name).read_text() == "precious", name
        assert (folder / name).is_file() and not (folder / name).is_symlink(), name
    assert "near" in paths["results_csv"].read_text()
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "results.json"
    write_text(path, "old")
    with pytest.raises(RuntimeError), replacing(path) as new:
        new.write_text("half")
        raise RuntimeError("killed midway")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    write_text(path, "new")
    assert path.read_text() == "new" and oct(path.stat().st_mode & 0o777) == oct(0o644)


def test_evaluate_refuses_a_store_that_is_a_link(tmp_path):
    gt = tmp_path / "gt"
    gt.mkdir()
    write_video(gt / "a.mp4", gradient(10), audio=tone(0.4))
    out, target = tmp_path / "out", tmp_path / "elsewhere.sqlite"
    out.mkdir()
    target.write_bytes(b"")
    (out / RESULTS_DB).symlink_to(target)
    with pytest.raises(UserError, match="results.sqlite is a symbolic link"):
        evaluate(gt, {"m": gt}, out, quality="proxy", progress=False, cache=False)
    assert target.read_bytes() == b""
