"""The code is lint-clean: `ruff check` passes on the repository with pyproject.toml's [tool.ruff]
rules (ruff is pinned in constraints.txt and comes with the `test` extra), so CI lints as
`./dev check` and the pre-commit hook do."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    # No cache: it would sit in the work tree, and a stale one could hide a finding.
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"ruff check found problems (`ruff check --fix` fixes some):\n{run.stdout}{run.stderr}"
