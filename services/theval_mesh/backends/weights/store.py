"""The weights store: one flat directory holding the quality models' weight files by their
published names (registry.py), plus SHA256SUMS written by `fetch`.

Nothing here imports torch or pyiqa, so `theval weights status` stays fast.
"""
import hashlib
import json
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.weights.registry import HEADPOSE_MODELS, MODELS, WeightFile
from theval_mesh.backends.weights.registry import model as get_model
from theval_mesh.pure.errors import UserError

MANIFEST = "SHA256SUMS"
MARKER = "STAND-IN.json"  # written by backends/stand_in next to the stand-in files it generates
FETCH_HINT = "run `theval weights fetch` on a machine with internet access and copy the store here"


def default_store() -> Path:
    env = os.environ.get("THEVAL_WEIGHTS")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "theval" / "weights"


def resolve(store=None) -> Path:
    return Path(store).expanduser() if store else default_store()


def read_marker(store) -> dict | None:
    """STAND-IN.json of the store (seed, generator, sha256 of each stand-in file), or None."""
    try:
        marker = json.loads((resolve(store) / MARKER).read_text())
        return marker if isinstance(marker, dict) else None
    except (OSError, ValueError):
        return None


def stand_in_seed(store, name: str, sha256: str | None) -> int | None:
    """The seed when `name` in `store` is a deterministic stand-in file (its checksum is the one
    STAND-IN.json records for it), else None. A stand-in is never the published weights."""
    marker = read_marker(store) or {}
    entry = marker.get("files", {}).get(name) if isinstance(marker.get("files"), dict) else None
    if sha256 and isinstance(entry, dict) and entry.get("sha256") == sha256:
        return int(marker.get("seed", -1))
    return None


def stand_in_label(seed: int) -> str:
    return f"stand-in:{seed}"


def read_manifest(store) -> dict:
    path = resolve(store) / MANIFEST
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[1].lstrip("*")] = parts[0].lower()
    return out


def _write_manifest(store: Path, entries: dict) -> None:
    merged = {**read_manifest(store), **entries}
    lines = [f"{sha}  {name}\n" for name, sha in sorted(merged.items())]
    (store / MANIFEST).write_text("".join(lines))


@dataclass
class FileRow:
    model: str
    file: str
    path: str
    present: bool
    sha256: str | None = None
    expected: str | None = None  # published prefix or SHA256SUMS entry
    state: str = ""  # status: present|missing|stand-in; verify: ok|mismatch|missing|unverified|stand-in
    detail: str = ""
    stand_in_seed: int | None = None  # a deterministic stand-in file (backends/stand_in) of this seed


def _models(models) -> list:
    """The named models, else the default run's: the quality models and the head-pose network."""
    return [get_model(n) for n in models] if models else [*MODELS.values(), *HEADPOSE_MODELS.values()]


def _files(models) -> list[tuple[str, WeightFile]]:
    """(model, file) pairs; a file shared by several models is listed once."""
    seen, out = set(), []
    for m in _models(models):
        for f in m.files:
            if f.name not in seen:
                seen.add(f.name)
                out.append((m.name, f))
    return out


def missing_files(store=None, models=None) -> list[str]:
    """Names of the files the given models need that are not in the store (no hashing)."""
    root = resolve(store)
    return [f.name for _, f in _files(models) if not (root / f.name).is_file()]


def status(store=None, models=None, checksums: bool = True) -> list[FileRow]:
    root = resolve(store)
    rows = []
    for model_name, f in _files(models):
        path = root / f.name
        present = path.is_file()
        sha = sha256_file(path) if present and checksums else None
        seed = stand_in_seed(root, f.name, sha)
        rows.append(FileRow(model_name, f.name, str(path), present, sha, f.sha256_prefix,
                            "missing" if not present else "present" if seed is None else "stand-in",
                            stand_in_seed=seed))
    return rows


def _check(row: FileRow, prefix: str | None, pinned: str | None) -> None:
    if not row.present:
        row.state, row.detail = "missing", FETCH_HINT
    elif row.stand_in_seed is not None:
        row.state = "stand-in"
        row.detail = (f"deterministic stand-in weights (seed {row.stand_in_seed}), not the "
                      "published file: its scores mean nothing")
    elif prefix and not row.sha256.startswith(prefix):
        row.state = "mismatch"
        row.detail = f"sha256 {row.sha256[:12]}... does not start with the published {prefix}"
    elif pinned and row.sha256 != pinned:
        row.state = "mismatch"
        row.detail = f"sha256 {row.sha256[:12]}... differs from {MANIFEST} ({pinned[:12]}...)"
    elif prefix or pinned:
        row.state = "ok"
    else:
        row.state, row.detail = "unverified", "no published checksum"


def verify(store=None, models=None) -> list[FileRow]:
    """Rows with state ok | mismatch | missing | unverified (present, nothing to compare with)."""
    pinned = read_manifest(store)
    rows = status(store, models)
    for row in rows:
        prefix, pin = row.expected, pinned.get(row.file)  # status() put the published prefix
        row.expected = prefix or pin
        _check(row, prefix, pin)
    return rows


def _download(url: str, dest: Path, prefix: str | None, timeout: float) -> str:
    """Stream url to dest through a temp file, checking the published sha256 prefix."""
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
        digest = h.hexdigest()
        if prefix and not digest.startswith(prefix):
            raise UserError(f"{url} downloaded with sha256 {digest[:12]}..., expected {prefix}...: "
                            "not saved; try again or copy the file by hand")
        os.replace(tmp, dest)
        return digest
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fetch(store=None, models=None, timeout: float = 60.0) -> list[FileRow]:
    """Download every missing or mismatching file of the models into the store.

    This is the only code that touches the network. It stops at the first failure with a
    one-line UserError naming the URL, the store directory and the files still missing.
    """
    root = resolve(store)
    root.mkdir(parents=True, exist_ok=True)
    todo = [(m, f) for m, f in _files(models)
            if not (root / f.name).is_file()
            or (f.sha256_prefix and not sha256_file(root / f.name).startswith(f.sha256_prefix))]
    fetched = {}
    for _, f in todo:
        try:
            fetched[f.name] = _download(f.url, root / f.name, f.sha256_prefix, timeout)
        except OSError as err:  # URLError, timeouts, refused connections, disk full
            left = [g.name for _, g in todo if g.name not in fetched]
            reason = getattr(err, "reason", None) or err
            raise UserError(
                f"cannot download {f.url} ({reason}); on a machine with internet access run "
                f"`theval weights fetch --store DIR` and copy DIR here, or copy these files by "
                f"hand into {root}: {', '.join(left)}") from None
        finally:
            if fetched:
                _write_manifest(root, fetched)
    return verify(root, models)
