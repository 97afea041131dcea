"""File checksums for provenance."""
import hashlib
from functools import lru_cache


@lru_cache(maxsize=64)
def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
