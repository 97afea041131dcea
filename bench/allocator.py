"""The allocator thresholds theval_mesh sets (theval_mesh/malloc.py) against glibc's defaults: each
network's images per second and the process's peak memory, eager torch and the default runtime.

glibc's settings are per process, so each side runs in a fresh process of this run (THEVAL_MALLOC=
system for glibc's defaults), one after the other, twice, alternating; the same stand-in weights and
inputs (bench/network_speed.py's), the product's own call paths. Also a whole frame pass is timed
by bench/clip_cost.py; this isolates the networks.

    .venv/bin/python bench/allocator.py [BATCH]   # default 8
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT  # noqa: F401 - first: the repository's root on sys.path

SIDES = {"glibc defaults": {"THEVAL_MALLOC": "system"}, "theval_mesh's": {}}
RUNTIMES = ("torch", "auto")
CHILD = """
import json, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
from network_speed import inputs, networks
from pathlib import Path
from theval_mesh import malloc
def hwm():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]) / 1024
out = {{"state": malloc.tune(), "rate": {{}}}}
for runtime in {runtimes!r}:
    nets = networks(Path({store!r}), runtime)
    rng = np.random.default_rng(0)
    x = inputs(rng, {batch})
    for name, run in nets.items():
        run(inputs(rng, 1))  # first-call allocations
        start = time.perf_counter()
        run(x)
        out["rate"][f"{{name}} {{runtime}}"] = {batch} / (time.perf_counter() - start)
    del nets
out["peak_mib"] = hwm()
print(json.dumps(out))
"""


def side(env: dict, store: Path, batch: int) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "THEVAL_MALLOC"}
    code = CHILD.format(bench=str(Path(__file__).parent), runtimes=RUNTIMES, store=str(store), batch=batch)
    done = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, check=True, capture_output=True,
                          text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    from theval_mesh.backends import stand_in

    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    store = Path(tempfile.mkdtemp(prefix="theval-bench-allocator-"))  # removed at exit
    atexit.register(shutil.rmtree, store, True)
    stand_in.write(store, 0, headpose=True)
    side(SIDES["theval_mesh's"], store, 1)  # the exports, made once before anything is timed
    runs = {name: [] for name in SIDES}
    for _ in range(2):
        for name, env in SIDES.items():
            runs[name].append(side(env, store, batch))
            print(f"{name}: {runs[name][-1]['state']}, peak {runs[name][-1]['peak_mib']:.0f} MiB", flush=True)
    print(f"\n{os.cpu_count()} cores, stand-in weights, batch {batch}, images per second (best of 2 runs):")
    base, tuned = runs["glibc defaults"], runs["theval_mesh's"]
    for key in base[0]["rate"]:
        b, t = max(r["rate"][key] for r in base), max(r["rate"][key] for r in tuned)
        print(f"  {key:<26} glibc {b:7.2f}  theval_mesh {t:7.2f}  {t / b:5.2f}x")
    print(f"  peak memory, every network loaded and run: glibc {max(r['peak_mib'] for r in base):.0f} MiB, "
          f"theval_mesh {max(r['peak_mib'] for r in tuned):.0f} MiB")


if __name__ == "__main__":
    main()
