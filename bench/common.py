"""Shared by the benchmarks: a synthetic kit made once in a temp folder, and a timer.

Importing it also puts the repository's root on sys.path, the one place that does: a benchmark
runs as a file (`.venv/bin/python bench/NAME.py`), which puts bench/ there, not the root, and
imports the tests' helpers and the scripts as packages (`from tests.support.mesh_support import
Mesh`, `from scripts import containers`). So a benchmark imports `common` before those."""
import sys
import tempfile
import time
from pathlib import Path

from theval_mesh.synth import generate_kit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def kit(n_clips=3, duration_s=6.0, size=256, variants=()):
    out = Path(tempfile.mkdtemp(prefix="theval-bench-"))
    return generate_kit(out, seed=1, n_clips=n_clips, duration_s=duration_s, size=size, variants=variants)


def best_of(fn, repeats=2):
    """Best wall time of `repeats` runs (the least disturbed by the rest of the machine)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
