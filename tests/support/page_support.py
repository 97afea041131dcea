"""What the tests of the development pages (docs/adding-a-*.md) share: a copy of the repository to
follow a page in, the page's code blocks by the file they belong to, putting one into its file, and
running the copy's own code."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A block that belongs to a file starts with a comment naming it: "# services/theval_mesh/....py"
# ("// protos/...proto").
BLOCK = re.compile(r"^```\w*\n(?:#|//) (\S+)\n(.*?)^```$", re.M | re.S)


def copy_repository(dest: Path, *parts: str) -> Path:
    """The given files and folders of the repository in `dest` (no caches, no tests/data: 17 MB of
    clips the unit tests do not read, no secrets/)."""
    def ignored(folder, names):
        skip = {n for n in names if n in ("__pycache__", ".pytest_cache", "secrets") or n.endswith(".egg-info")}
        return skip | ({"data"} if Path(folder) == ROOT / "tests" else set())

    for part in parts:
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, dest / part, ignore=ignored)
        else:
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / part, dest / part)
    return dest


def blocks(page: Path) -> dict:
    """{file: [text of each block, in page order]} of the page's code blocks that name their file."""
    found = {}
    for path, text in BLOCK.findall(page.read_text(encoding="utf-8")):
        found.setdefault(path, []).append(text)
    return found


def add_file(repo: Path, path: str, text: str):
    assert not (repo / path).exists(), f"{path} exists already"
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)


def insert(file: Path, text: str, before: str | None = None):
    """Put a block into an existing file above the first line that starts with `before` (None: at its
    end); in a Python file, its imports go below the file's last import."""
    lines = file.read_text().splitlines(keepends=True)
    if file.suffix == ".py":
        imports = [line for line in text.splitlines(keepends=True) if line.startswith(("from ", "import "))]
        text = "".join(line for line in text.splitlines(keepends=True) if line not in imports).strip("\n") + "\n"
        last = max(i for i, line in enumerate(lines) if line.startswith(("from ", "import ")))
        lines[last + 1:last + 1] = imports
        text += "\n\n" if text.startswith(("def ", "class ")) else "\n"
    at = len(lines) if before is None else next((i for i, line in enumerate(lines) if line.startswith(before)), None)
    assert at is not None, f"{file.name} has no line starting with {before!r}: the page is out of date"
    lines[at:at] = [text]
    file.write_text("".join(lines))


def environment(repo: Path) -> dict:
    """The environment of a process of the copy: its package on the path."""
    return {**os.environ, "PYTHONPATH": str(repo / "services"), "PYTHONDONTWRITEBYTECODE": "1"}


def run(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`python ARGS` in the copy."""
    done = subprocess.run([sys.executable, *args], cwd=repo, env=environment(repo), capture_output=True, text=True,
                          timeout=600)
    assert not check or done.returncode == 0, \
        f"python {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done
