"""`theval evaluate` against the reference's four landmark/VAD scripts, side by side on the same
clips, alternating, several runs each; medians and the ratios. Every side is a command a user
types, timed from start to exit (start-up included):

  - the reference: Newbyl/THEval 3603338's lip_dynamics.py, eyebrow_dynamics.py,
    silent_lip_stability.py and lip_sync.py, unmodified, in their pinned environment, each run
    over the list of clips as its README runs it (4 metrics);
  - `theval evaluate --gt DIR --out OUT --quality proxy --no-cache` (all 8 metrics): with one
    worker (in this process, the default), with --workers 2 (a local Ray), and with
    --single-pass (one FaceMesh pass instead of the reference's five: a speed option whose values
    differ from the reference's, docs/metrics.md);
  - the same with the result cache already holding these clips (a re-run: nothing is scored).

It also prints the time from the command's start to its first scored video (the job store is
polled), the start-up a user waits before anything moves.

Clips: the parity clips (full length); past their number, losslessly cut shorter copies of them
(other bytes, so the cache cannot serve one for another).

    THEVAL_OFFICIAL_REPO=... ORACLE_VENV=... .venv/bin/python bench/side_by_side.py [CLIPS] [RUNS]
                                                                       # default 9 clips, 3 runs
"""
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT  # noqa: F401 - first: puts the repository's root on sys.path (tests.support)
from reference_speed import LANDMARK_SCRIPTS, export_scripts, need

from tests.support.model_parity_set import cut
from tests.support.parity_set import clip, oracle

THEVAL = str(Path(sys.executable).parent / "theval")
QUIET_ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "THEVAL_CACHE": "off"}


def clips(n: int, dest: Path) -> list[Path]:
    names = sorted(oracle())
    paths, copy = [], 0
    while len(paths) < n:
        for name in names[:n - len(paths)]:
            if copy == 0:
                paths.append(dest / f"{name}.mp4")
                shutil.copy(clip(name), paths[-1])
            else:
                import av
                with av.open(str(clip(name))) as c:
                    frames = c.streams.video[0].frames
                paths.append(cut(name, max(60, frames - 20 * copy), dest / f"{name}_cut{copy}.mp4"))
        copy += 1
    return paths


def frames(paths) -> int:
    import av
    total = 0
    for p in paths:
        with av.open(str(p)) as c:
            total += c.streams.video[0].frames
    return total


def first_result_s(cmd: list[str], out: Path) -> tuple[float, float]:
    """(seconds to the first committed result, seconds to exit) of one `theval evaluate`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=QUIET_ENV)
    first = None
    db = out / "results.sqlite"
    while proc.poll() is None:
        if first is None and db.exists():
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
                    if con.execute("SELECT COUNT(*) FROM results").fetchone()[0]:
                        first = time.perf_counter() - start
            except sqlite3.Error:
                pass  # being made
        time.sleep(0.02)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode})")
    total = time.perf_counter() - start
    return (first if first is not None else total), total


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    repo, venv = need("THEVAL_OFFICIAL_REPO"), need("ORACLE_VENV")
    tmp = Path(tempfile.mkdtemp(prefix="theval-bench-side-by-side-"))
    gt = tmp / "clips"
    gt.mkdir()
    paths = clips(n, gt)
    (tmp / "list.txt").write_text("".join(f"{p}\n" for p in paths))
    print(f"{len(paths)} clips, {frames(paths)} frames; {runs} runs of each side, alternating; medians", flush=True)
    tree = export_scripts(repo, tmp / "reference")

    def reference(i: int) -> float:
        t = time.perf_counter()
        for script in LANDMARK_SCRIPTS:
            subprocess.run([f"{venv}/bin/python", Path(script).name, "--video_txt", str(tmp / "list.txt"),
                            "--output_txt", str(tmp / f"{Path(script).stem}-{i}.csv")], check=True,
                           cwd=tree / Path(script).parent, env=QUIET_ENV, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        return time.perf_counter() - t

    def ours(i: int, label: str, *extra) -> tuple[float, float]:
        out = tmp / f"ours-{label}-{i}"
        return first_result_s([THEVAL, "evaluate", "--gt", str(gt), "--out", str(out), "--quality", "proxy",
                               "--quiet", *extra], out)

    cache = tmp / "cache.sqlite"
    ours(0, "fill", "--cache", str(cache))  # the cache holds every clip; also warms the file cache
    sides = {"reference, 4 scripts": [], "theval evaluate (8 metrics)": [], "theval evaluate --workers 2": [],
             "theval evaluate --single-pass": [], "theval evaluate, re-run (cache)": []}
    firsts = {k: [] for k in sides}
    for i in range(runs):
        sides["reference, 4 scripts"].append(reference(i))
        for label, extra in (("theval evaluate (8 metrics)", ["--no-cache"]),
                             ("theval evaluate --workers 2", ["--no-cache", "--workers", "2"]),
                             ("theval evaluate --single-pass", ["--no-cache", "--single-pass"]),
                             ("theval evaluate, re-run (cache)", ["--cache", str(cache)])):
            first, total = ours(i, label.split()[-1].strip("()"), *extra)
            sides[label].append(total)
            firsts[label].append(first)
        print(f"  run {i + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in sides.items()), flush=True)
    ref = statistics.median(sides["reference, 4 scripts"])
    width = max(map(len, sides))
    for label, times in sides.items():
        median = statistics.median(times)
        first = f"  first video after {statistics.median(firsts[label]):5.2f} s" if firsts[label] else ""
        print(f"{label:<{width}}  {median:7.1f} s  {ref / median:5.2f}x the reference{first}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
