"""One run's files in a results folder, and the check that they are still that run's.

results.json is written last; its "run" block names the run (a new id each time the files are
written) and each other file it wrote with its sha256 and, for the tables, its rows. A run
stopped between two files (a second run into the same --out, killed), or a file cut or edited
since, leaves files that disagree with results.json: `theval report`, `align` and `score` refuse
such a folder in one line that says how to write it again. Folders written before the block
existed have none and are read as before."""
import csv
import json
import uuid
from pathlib import Path

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.pure.errors import UserError

RUN = "run"  # results.json's key
RESULTS_JSON = "results.json"
RESULTS_DB = "results.sqlite"  # the job store of `theval evaluate`: every result as it is committed


def rows_of(path: Path) -> int | None:
    """Data rows of a table (CSV records after the header, JSON lines); None for other files."""
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            return max(sum(1 for _ in csv.reader(f)) - 1, 0)
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            return sum(1 for line in f if line.strip())
    return None


def describe(folder: Path, files: list[str]) -> dict:
    """results.json's "run" block for `files` of `folder`, as they are now."""
    described = {}
    for name in files:
        path = folder / name
        entry = {"sha256": sha256_file(path)}
        rows = rows_of(path)
        if rows is not None:
            entry["rows"] = rows
        described[name] = entry
    return {"id": uuid.uuid4().hex, "files": described}


def disagreement(folder: Path, block: dict) -> str | None:
    """Which of the folder's files differ from the run block, and how; None when all are that run's."""
    differ = []
    for name, want in sorted(block.get("files", {}).items()):
        path = folder / name
        if path.is_symlink() or not path.is_file():
            differ.append(f"{name} (missing)")
        elif sha256_file(path) != want.get("sha256"):
            rows, wrote = rows_of(path), want.get("rows")
            differ.append(f"{name} ({rows} rows, it wrote {wrote})" if rows is not None and rows != wrote
                          else f"{name} (other content)")
    return ", ".join(differ) or None


def check_folder(folder, document: dict | None = None, listing: str | None = None) -> None:
    """UserError when the files of a results folder are not those of the run its results.json
    names. document: results.json already read (read here otherwise; a folder without a readable
    one is left to the caller's own error); listing: check only if the run wrote this file (a
    CSV given by path may sit in any folder)."""
    folder = Path(folder)
    if document is None:
        try:
            document = json.loads((folder / RESULTS_JSON).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
    block = document.get(RUN) if isinstance(document, dict) else None
    if not isinstance(block, dict) or (listing is not None and listing not in block.get("files", {})):
        return  # written before results.json named its run, or not one of its files
    why = disagreement(folder, block)
    if why is None:
        return
    job = document.get("job")
    if job and (folder / RESULTS_DB).is_file():
        fix = f"theval bulk results {job} --store {folder / RESULTS_DB} --out {folder}"
    else:
        fix = "the same `theval evaluate` with this --out"
    raise UserError(f"{folder}: files differ from what the run in results.json ({block.get('id')}) wrote: {why}. "
                    f"A run into this folder stopped while writing; write the files again: {fix}")
