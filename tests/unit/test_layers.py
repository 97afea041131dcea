"""The layers of the package import one way (import-linter on pyproject.toml's contracts), and the
layer list of docs/architecture.md is the contract's."""
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept():
    # In a process of its own: import-linter reconfigures logging (it disables the loggers that
    # exist, ours included) and would change the tests that run after it. No cache: it would sit
    # in the work tree, and a stale one could hide a new import.
    code = ("from importlinter.cli import lint_imports; "
            f"raise SystemExit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"a module imports against the layers:\n{run.stdout}{run.stderr}"


def test_the_architecture_page_lists_the_layers_of_the_contract():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    section = (ROOT / "docs" / "architecture.md").read_text().split("\n## Layers\n", 1)[1]
    block = section.split("```", 2)[1].split("\n", 1)[1]  # after the fence's language tag
    listed = [re.split(r"\s{2,}", line.strip())[0] for line in block.strip().splitlines()]
    assert listed == layers, "docs/architecture.md's layer list (section Layers) is not pyproject.toml's contract"
