"""The one file checksum of the project: provenance and weight verification both use it."""
import hashlib
from pathlib import Path

_CACHE: dict = {}


def sha256_file(path) -> str:
    """Hex sha256 of a file, cached by (path, size, mtime): weight files are hundreds of MB and
    every result's provenance names them."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _CACHE[key] = h.hexdigest()
    return _CACHE[key]
