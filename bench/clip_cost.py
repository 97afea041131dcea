"""What one 10 s clip (250 frames, 512x512, 25 fps, speech; two parity clips cut losslessly)
costs, cold and warm, embedded and through the mesh (proxy quality, all 8 metrics):

  embedded cold     `theval evaluate --gt CLIP --no-cache`: a new process, start to exit
  embedded warm     the Python API's Scorer, models loaded, one more clip
  embedded cached   `theval evaluate --gt CLIP` again: the result cache holds it
  mesh cold         the first Evaluate call once the mesh is SERVING (its models load before that)
  mesh warm         the next call, another clip
  mesh cached       the first clip's bytes again (the evaluator's cache)

Ratios are against embedded cold, in this run.

    .venv/bin/python bench/clip_cost.py
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT  # noqa: F401 - first: puts the repository's root on sys.path (tests.support)
from mesh_overhead import start_mesh

from tests.support.model_parity_set import cut
from theval_mesh import Client, Scorer
from theval_mesh.rpc.launcher import stop_all

THEVAL = str(Path(sys.executable).parent / "theval")
FRAMES = 250


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    tmp = Path(tempfile.mkdtemp(prefix="theval-bench-clip-cost-"))
    clips = [cut(name, FRAMES, tmp / f"{name}.mp4") for name in ("astronaut_de_long", "t1center_en_long")]
    cache = tmp / "cache.sqlite"

    def cli(out: str, *extra):
        subprocess.run([THEVAL, "evaluate", "--gt", str(clips[0]), "--out", str(tmp / out), "--quality", "proxy",
                        "--quiet", *extra], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    rows = {"embedded cold": timed(lambda: cli("cold", "--no-cache"))}
    cli("fill", "--cache", str(cache))
    rows["embedded cached"] = timed(lambda: cli("cached", "--cache", str(cache)))
    scorer = Scorer(quality="proxy")
    scorer.score(clips[0])
    rows["embedded warm"] = timed(lambda: scorer.score(clips[1]))

    os.environ["THEVAL_CACHE"] = str(cache)  # the evaluator's cache is on (it lives in its store)
    logs = tmp / "logs"
    logs.mkdir()
    procs = start_mesh(tmp, logs)
    try:
        evaluator = next(p for p in procs if p.service == "evaluator")
        with Client(evaluator.address, timeout_s=600) as client:
            rows["mesh cold"] = timed(lambda: client.evaluate(str(clips[0])))
            rows["mesh warm"] = timed(lambda: client.evaluate(str(clips[1])))
            rows["mesh cached"] = timed(lambda: client.evaluate(str(clips[0])))
    finally:
        stop_all(procs)
    base = rows["embedded cold"]
    print(f"one {FRAMES / 25:.0f} s clip ({FRAMES} frames, 512x512), proxy quality, 8 metrics:")
    for label in ("embedded cold", "embedded warm", "embedded cached", "mesh cold", "mesh warm", "mesh cached"):
        print(f"  {label:<16} {rows[label]:7.3f} s   {rows[label] / base:6.3f}x embedded cold")


if __name__ == "__main__":
    main()
