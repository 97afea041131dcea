"""Bad usage exits 2, as docs/usage.md says, with the command's own usage: a mistyped flag names
the nearest one of that command, and a flag's malformed value (--model without NAME=, a setting
out of range) is refused before any work."""
import pytest

from theval_mesh.commands.cli import main


def refused(capsys, argv) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_a_mistyped_flag_names_the_nearest_one_of_its_command(capsys, tmp_path):
    err = refused(capsys, ["evaluate", "--gt", str(tmp_path), "--modle", "a=b", "--out", str(tmp_path / "o")])
    assert err.startswith("usage: theval evaluate") and "--modle (did you mean --model?)" in err
    err = refused(capsys, ["bulk", "submit", "--gt", str(tmp_path), "--qualty", "proxy"])
    assert "usage: theval bulk submit" in err and "--qualty (did you mean --quality?)" in err
    assert not (tmp_path / "o").exists()


def test_an_earlier_command_name_runs_its_command(capsys):
    """`theval legacy` is `theval classic` (its name before the rename)."""
    with pytest.raises(SystemExit) as stop:
        main(["legacy", "--help"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("usage: theval classic")
    err = refused(capsys, ["legacy", "--generated", "x", "--gt", "y", "--lse-pipline", "z"])
    assert "--lse-pipline (did you mean --lse-pipeline?)" in err


@pytest.mark.parametrize("argv, says", [
    (["--model", "modelA"], "expected NAME=DIR"),
    (["--model", "m=GT", "--frame-stride", "0"], "frame stride must be >= 1"),
])
def test_a_malformed_value_exits_2_before_any_work(capsys, tmp_path, argv, says):
    (tmp_path / "GT").mkdir()
    argv = [a.replace("GT", str(tmp_path / "GT")) for a in argv]
    code = main(["evaluate", "--gt", str(tmp_path / "GT"), *argv, "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_malformed_fid_frame_sampling_exits_2_naming_the_forms(capsys, tmp_path):
    code = main(["classic", "--generated", str(tmp_path), "--gt", str(tmp_path), "--fid-frames", "every3",
                 "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2 and "one of all, every:K, count:N, first:N" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
