"""The layers of the package import one way (import-linter on pyproject.toml's contracts), and the
README's layer list is the contract's."""
import re
import tomllib
from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept(monkeypatch):
    monkeypatch.chdir(ROOT)
    # no_cache: the cache would sit in the work tree, and a stale one could hide a new import.
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0, \
        "a module imports against the layers: see the contract broken above"


def test_the_readme_lists_the_layers_of_the_contract():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    section = (ROOT / "README.md").read_text().split("## Architecture: layers", 1)[1]
    block = section.split("```", 2)[1]
    listed = [re.split(r"\s{2,}", line.strip())[0] for line in block.strip().splitlines()]
    assert listed == layers
