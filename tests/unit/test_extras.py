"""The table of commands/extras.py against pyproject.toml's extras, and the CLI with every module of an
extra missing (the base install in this process; tests/e2e/test_install.py installs the
wheel in a clean virtualenv)."""
import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from theval_mesh.commands.extras import COMMAND_EXTRAS, COMPOSITES, MODULE_EXTRAS, missing_extra

PYPROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_by(extra: str) -> set[str]:
    """Distributions `pip install theval-mesh[extra]` installs (extra "": the base install), from
    pyproject.toml and then the installed metadata of each dependency, recursively."""
    todo, seen = [], set()
    for text in PYPROJECT["project"]["dependencies"] + (EXTRAS[extra] if extra else []):
        req = Requirement(text)
        if _norm(req.name) == "theval-mesh":
            seen |= {e for sub in req.extras for e in installed_by(sub)}
        else:
            todo.append((req.name, set(req.extras)))
    while todo:
        name, extras = todo.pop()
        if _norm(name) in seen:
            continue
        seen.add(_norm(name))
        for text in md.requires(name) or []:
            req = Requirement(text)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
                continue
            todo.append((req.name, set(req.extras)))
    return seen


@pytest.mark.parametrize("module", sorted(MODULE_EXTRAS))
def test_each_module_comes_with_its_extras_and_not_with_the_base(module):
    providers = {_norm(d) for d in md.packages_distributions().get(module, [])}
    assert providers, f"{module} is not installed here (./dev installs every extra)"
    assert not providers & installed_by(""), f"the base install has {module}: drop it from the table"
    for extra in MODULE_EXTRAS[module]:
        assert extra in EXTRAS, extra
        assert providers & installed_by(extra), f"theval-mesh[{extra}] does not install {module}"


def test_the_composite_extras_are_pyprojects():
    for extra, parts in COMPOSITES.items():
        named = {e for text in EXTRAS[extra] if _norm(Requirement(text).name) == "theval-mesh"
                 for e in Requirement(text).extras}
        assert set(parts) == {extra} | named, extra
    for extra, texts in EXTRAS.items():
        if extra not in ("all", "test") and any(_norm(Requirement(t).name) == "theval-mesh" for t in texts):
            assert extra in COMPOSITES, f"{extra} installs other extras: add it to COMPOSITES"
    for extras in COMMAND_EXTRAS.values():
        assert set(extras.split(",")) <= set(EXTRAS), extras


def test_the_line_names_the_extra_and_what_the_command_needs():
    line = missing_extra(ModuleNotFoundError("No module named 'cv2'", name="cv2"), "evaluate")
    assert line.startswith("theval evaluate needs the 'landmarks' extra") and "'.[worker]'" in line
    line = missing_extra(ModuleNotFoundError(name="mlflow"), "evaluate")  # an option's extra
    assert "needs the 'mlflow' extra" in line and "'.[mlflow]'" in line
    line = missing_extra(ModuleNotFoundError(name="torch.nn"), "serve", service="quality")
    assert "needs the 'quality' extra" in line and "'.[quality]'" in line
    assert missing_extra(ModuleNotFoundError(name="theval_mesh.nowhere"), "evaluate") is None  # a bug: traceback


# Runs the CLI with every module of the table unimportable: the base install's view.
BASE = """
import sys
from importlib.abc import MetaPathFinder
BLOCKED = set(sys.argv[1].split(","))
class Block(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from theval_mesh.commands.cli import main
sys.exit(main(sys.argv[2:]))
"""


def base_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-c", BASE, ",".join(MODULE_EXTRAS), *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_help_and_version_need_no_extra():
    for args in (["--help"], ["--version"], ["evaluate", "--help"], ["bulk", "--help"]):
        done = base_cli(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)


@pytest.mark.parametrize("args,extra,hint", [
    (["evaluate", "--gt", "gt", "--model", "m=gt", "--out", "out"], "landmarks", "worker"),
    (["demo", "--out", "out"], "landmarks", "worker,synth"),
])
def test_a_command_without_its_extra_fails_in_one_line(args, extra, hint, tmp_path, clip_writer):
    (tmp_path / "gt").mkdir()
    clip_writer("gt/clip.mp4", tone=[0.3])  # something to score: the inputs pass their checks first
    done = base_cli(*args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: theval {args[0]} needs the '{extra}' extra"), done.stderr
    assert f"'.[{hint}]'" in done.stderr
