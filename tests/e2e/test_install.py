"""Installing as the README says: the wheel built from the repository, in a clean virtualenv, with the
base dependencies only (pinned by constraints.txt; pip fetches them from PyPI when they are not in its
cache, as `./dev setup` does). The CLI answers --help and --version, and a command whose extra is not
installed fails in one line naming it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[2]


# the clean virtualenv sees none of this process's paths (PYTHONPATH has the checkout's services/)
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, env=CLEAN_ENV,
                          **kwargs)


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    # a copy of what the wheel is built from: no stale build/ or egg-info, nothing written into the checkout
    source = tmp / "source"
    shutil.copytree(ROOT / "services", source / "services", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", source, "-w", tmp)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp.glob("theval_mesh-*.whl")
    venv = tmp / "venv"
    made = run(sys.executable, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    installed = run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "-c", ROOT / "constraints.txt", wheel)
    assert installed.returncode == 0, installed.stderr
    return venv


def theval(venv, *args, cwd):
    return run(venv / "bin" / "theval", *args, cwd=cwd)


def test_the_base_install_has_no_extra(base_venv):
    listed = run(base_venv / "bin" / "python", "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check")
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert "theval-mesh" in names
    assert not names & {"torch", "mediapipe", "opencv-contrib-python", "opencv-python", "ray", "plotly"}, names
    imported = run(base_venv / "bin" / "python", "-c", "import theval_mesh; print(theval_mesh.__version__)")
    assert imported.returncode == 0 and imported.stdout.strip(), imported.stderr


def test_help_and_version_work(base_venv, tmp_path):
    shown = theval(base_venv, "--help", cwd=tmp_path)
    assert shown.returncode == 0 and "evaluate" in shown.stdout, shown.stderr
    version = theval(base_venv, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("theval "), version.stderr


@pytest.mark.parametrize("args,needs", [
    (["evaluate", "--gt", "gt", "--model", "m=gt", "--out", "out"], "'landmarks' extra"),
    (["demo"], "'landmarks' extra"),
    (["report", "out"], "'report' extra"),
])
def test_a_command_without_its_extra_fails_in_one_line(base_venv, tmp_path, args, needs, clip_writer):
    (tmp_path / "gt").mkdir()
    (tmp_path / "out").mkdir()
    clip_writer("gt/clip.mp4", tone=[0.3])  # something to score: the inputs pass their checks first
    done = theval(base_venv, *args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: theval {args[0]} needs the {needs}"), done.stderr
    assert "pip install -c constraints.txt '.[" in done.stderr
