"""The parity set: our values against the reference scripts' own, and our speed against theirs.

    bench/parity.py [N]     the first N clips of tests/data/parity (default 12; "all": 38)

Per mode (the reference's passes, the default; `--single-pass`), on the same clips in one run:
- parity: relative difference |ours - reference| / |reference| per clip and metric, median, p90
  and max, against the values the unmodified reference scripts gave (oracle.csv);
- speed: ms per video frame and "floors": the time of decoding the video plus ONE FaceMesh pass on
  one thread, measured here on each clip in the same run. The reference scripts' own time
  (oracle_timing.csv: the four landmark/VAD scripts, compute only, measured on this kind of
  machine) is shown in the same unit. Quality is the training-free proxy; "no quality" scores the
  landmark and audio metrics alone, so the proxy's share of a video's time shows.
"""
import csv
import sys
import time
from pathlib import Path

import numpy as np

from theval_mesh.backends.audio.backend import AudioBackend
from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.landmarks.backend import FaceTracker
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.engine import Engine
from theval_mesh.core.stages import LocalVideo, new_result, score
from theval_mesh.pure.settings import RunSettings

PARITY = Path(__file__).resolve().parent.parent / "tests" / "data" / "parity"
METRICS = ("lip_dynamics", "eyebrow_dynamics", "silent_lip_stability", "lip_sync")


def floor(path) -> float:
    """Seconds to decode the video and run one FaceMesh pass over it, one thread."""
    start = time.perf_counter()
    with FaceTracker(passes.SINGLE) as tracker:
        for _, frame in MediaReader(path).frames():
            tracker.process(frame)
    return time.perf_counter() - start


def scored(engine: Engine, path, quality=True):
    start = time.perf_counter()
    if quality:
        result = engine.score_video(path)
    else:
        result = new_result("", path, engine.settings, {})
        score(lambda: LocalVideo(path, engine.settings, engine.audio, None), result, engine.settings)
    return result, time.perf_counter() - start


def main():
    with open(PARITY / "oracle.csv") as f:
        oracle = {r["clip"]: r for r in csv.DictReader(f)}
    with open(PARITY / "clips" / "manifest.csv") as f:
        frames = {r["clip"]: int(r["n_frames"]) for r in csv.DictReader(f)}
    with open(PARITY / "oracle_timing.csv") as f:
        scripts = {}
        for r in csv.DictReader(f):
            scripts[r["clip_set"]] = scripts.get(r["clip_set"], 0.0) + float(r["compute_s"])
    arg = sys.argv[1] if len(sys.argv) > 1 else "12"
    names = sorted(oracle) if arg == "all" else sorted(oracle)[:int(arg)]
    modes = {"reference passes": RunSettings(quality="proxy"),
             "--single-pass": RunSettings(quality="proxy", single_pass=True)}
    engines = {m: Engine(s) for m, s in modes.items()}
    AudioBackend()  # warm
    seconds = {m: 0.0 for m in modes} | {f"{m}, no quality": 0.0 for m in modes}
    seconds |= {"floor": 0.0, "reference scripts": 0.0}
    diffs = {m: {k: [] for k in METRICS} for m in modes}
    total = 0
    for name in names:
        path = PARITY / "clips" / f"{name}.mp4"
        total += frames[name]
        seconds["floor"] += floor(path)
        seconds["reference scripts"] += scripts[name]
        for mode, engine in engines.items():
            result, s = scored(engine, path)
            seconds[mode] += s
            seconds[f"{mode}, no quality"] += scored(engine, path, quality=False)[1]
            for k in METRICS:
                ref = float(oracle[name][f"{k}_full"])
                diffs[mode][k].append((abs(result.metrics[k] - ref) / abs(ref), name))
        print(f"  {name}: {frames[name]} frames", file=sys.stderr, flush=True)

    base = seconds["floor"] / total
    print(f"\n{len(names)} parity clips, {total} frames; floor = decode + one FaceMesh pass, one thread "
          f"= {base * 1000:.1f} ms/frame\n")
    print(f"{'mode':32s} {'ms/frame':>9s} {'floors':>7s}")
    for mode, s in seconds.items():
        print(f"{mode:32s} {s / total * 1000:9.1f} {s / total / base:7.2f}")
    for mode in modes:
        proxy_share = seconds[mode] / seconds[f"{mode}, no quality"] - 1
        print(f"proxy quality adds {proxy_share:+.0%} to {mode}")
    for mode in modes:
        print(f"\n{mode}: relative difference to the reference scripts' values")
        print(f"{'metric':22s} {'median':>8s} {'p90':>8s} {'max':>8s}  worst clip")
        for k in METRICS:
            d = np.array([x for x, _ in diffs[mode][k]])
            worst = diffs[mode][k][int(np.argmax(d))][1]
            print(f"{k:22s} {np.median(d):8.2%} {np.percentile(d, 90):8.2%} {d.max():8.2%}  {worst}")


if __name__ == "__main__":
    main()
