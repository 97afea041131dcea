"""Shared by the benchmarks: a synthetic kit made once in a temp folder, and a timer."""
import tempfile
import time
from pathlib import Path

from theval_mesh.synth import generate_kit


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
