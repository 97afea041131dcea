"""scripts/compare_runs.py, the refactoring check: the same results in two folders are identical
whatever the wall time and the folder; one changed metric value is a difference."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "scripts" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def write_run(root: Path, lip_sync: str, seconds: str):
    (root / "results").mkdir(parents=True)
    video = root / "kit" / "gt" / "a.mp4"
    (root / "results" / "results.csv").write_text(
        f"model,video,status,lip_sync,seconds\nGT,{video},ok,{lip_sync},{seconds}\n")
    (root / "results" / "leaderboard.csv").write_text("model,Final score\nGT,1.0\n")


def test_identical_runs_in_other_folders_at_other_speeds_compare_equal(tmp_path, capsys):
    write_run(tmp_path / "before", "0.123", "4.2")
    write_run(tmp_path / "after", "0.123", "9.9")
    assert compare_runs.main([str(tmp_path / "before"), str(tmp_path / "after")]) == 0
    assert "identical" in capsys.readouterr().out


def test_a_changed_metric_value_is_reported(tmp_path, capsys):
    write_run(tmp_path / "before", "0.123", "4.2")
    write_run(tmp_path / "after", "0.12300000000000001", "4.2")
    assert compare_runs.main([str(tmp_path / "before"), str(tmp_path / "after")]) == 1
    assert "lip_sync: '0.123' -> '0.12300000000000001'" in capsys.readouterr().out
