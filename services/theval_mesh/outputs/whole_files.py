"""Files of a results folder written whole or not at all: each is written under a new name
beside it and renamed onto it."""
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

MODE = 0o644  # what open() gives under the usual umask: a results folder is read by others


@contextmanager
def replacing(path):
    """Yields the path of a new, empty file beside `path` (same suffix: matplotlib reads the format
    from it); when the block ends, that file is renamed onto `path`. A reader, or a run killed
    meanwhile, never sees half a file; a link planted at `path` is replaced, and its target is
    left alone. When the block raises, `path` is left as it was."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(name)
        os.chmod(name, MODE)
        os.replace(name, path)
    finally:
        if os.path.lexists(name):
            os.unlink(name)


def write_text(path, text: str) -> None:
    with replacing(path) as new:
        new.write_text(text, encoding="utf-8")
