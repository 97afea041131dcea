"""Throughput of the Ray orchestrator with 1 and 2 workers, and its overhead against the plain
in-process loop (`theval evaluate --inline`), on the same clips in one run.

Each variant scores the same clips as a fresh job (its own job store, so nothing is reused).
Steady-state figures use the time between the first and the last commit, which leaves out the
fixed start-up (Ray's ~5 s, each worker loading its models); totals include it.
Targets: Ray overhead under 10 % per video, 2 workers >= 1.6x the throughput of 1.

    .venv/bin/python bench/ray_throughput.py [VIDEOS] [SECONDS] [SIZE]
"""
import os
import sys
import tempfile
import time
from pathlib import Path

from common import kit

from theval_mesh.core.inputs import plan
from theval_mesh.jobs.pipeline import run_inline, run_ray
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.job_store import JobSpec, SqlJobStore


def run(variant: str, folder: Path, workdir: Path) -> dict:
    store = SqlJobStore(workdir / f"{variant}.sqlite")
    spec = JobSpec(inputs=[["GT", str(folder)]], settings=RunSettings(quality="proxy").key())
    job = store.create(spec, plan([("GT", str(folder))]))
    commits = []
    start = time.perf_counter()
    if variant == "inline":
        done = run_inline(store, job.id, on_result=lambda r: commits.append(time.perf_counter()))
    else:
        done = run_ray(store, job.id, int(variant[-1]), on_result=lambda r: commits.append(time.perf_counter()))
    total = time.perf_counter() - start
    assert done.state == "done" and done.failed == 0, (done.state, done.error)
    steady = (commits[-1] - commits[0]) / (len(commits) - 1)
    return {"total_s": total, "per_video_s": steady, "videos_per_min": 60 / steady}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    k = kit(n_clips=3, duration_s=seconds, size=size)
    workdir = Path(tempfile.mkdtemp(prefix="theval-bench-ray-"))
    folder = workdir / "clips"
    folder.mkdir()
    for i in range(n):
        os.link(k.videos()[i % 3], folder / f"c{i:03d}.mp4")
    print(f"{n} videos of {seconds:.0f} s at {size} px, proxy quality; {os.cpu_count()} cores", flush=True)
    out = {}
    for variant in ("inline", "ray-1", "ray-2"):
        out[variant] = run(variant, folder, workdir)
        r = out[variant]
        print(f"  {variant:<7} total {r['total_s']:6.1f} s, steady {r['per_video_s']:.3f} s/video "
              f"({r['videos_per_min']:.1f} videos/min)", flush=True)
    overhead = out["ray-1"]["per_video_s"] / out["inline"]["per_video_s"] - 1
    speedup = out["ray-2"]["videos_per_min"] / out["ray-1"]["videos_per_min"]
    print(f"\nRay overhead per video (1 worker vs inline loop): {overhead:+.1%} (target < 10 %)")
    print(f"2 workers vs 1: {speedup:.2f}x throughput (target >= 1.6x)")
    print(f"start-up (total - steady x videos): inline {out['inline']['total_s'] - n * out['inline']['per_video_s']:.1f} s, "
          f"ray-1 {out['ray-1']['total_s'] - n * out['ray-1']['per_video_s']:.1f} s")


if __name__ == "__main__":
    main()
