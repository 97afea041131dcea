"""Where the seconds before the first scored frame go, each phase in a fresh process (three
processes, medians): the interpreter and theval's API, MediaPipe, the models' first use (Silero's
ONNX session, a FaceMesh graph per pass), torch (which only the networks need), a local Ray and
one actor holding the engine;
then `theval evaluate` on one 2 s clip, inline (the default with one worker) vs --ray, start to
exit, and the same clip from the result cache.

    .venv/bin/python bench/startup.py
"""
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import kit

THEVAL = str(Path(sys.executable).parent / "theval")
RUNS = 3

PHASES = r'''
import json, sys, time
t = [("start", time.perf_counter())]
import theval_mesh.api  # noqa: F401
t.append(("theval API import", time.perf_counter()))
import mediapipe  # noqa: F401
t.append(("MediaPipe import", time.perf_counter()))
from theval_mesh.core.engine import Engine
from theval_mesh.pure.settings import RunSettings
engine = Engine(RunSettings(quality="proxy"))
t.append(("engine import and construction", time.perf_counter()))
engine.audio.vad.probabilities([__import__("numpy").zeros(16000, "float32")])
t.append(("Silero VAD first call", time.perf_counter()))
from theval_mesh.backends.landmarks.backend import FaceTracker
from theval_mesh.core.frame_pass import mesh_passes
for p in mesh_passes(RunSettings(quality="proxy")).values():
    with FaceTracker(p) as tracker:  # the graph starts on its first frame
        tracker.process(__import__("numpy").zeros((256, 256, 3), "uint8"))
t.append(("FaceMesh graphs (one per pass)", time.perf_counter()))
assert "torch" not in sys.modules  # the proxy's run needs no torch (the VAD runs on onnxruntime)
import torch  # noqa: F401
t.append(("torch import (only the networks need it)", time.perf_counter()))
if sys.argv[1] == "ray":
    from theval_mesh.jobs import pipeline
    pipeline.start_ray(None, 1)
    t.append(("local Ray start", time.perf_counter()))
    import ray
    actor = ray.remote(pipeline.ScoringWorker).options(num_cpus=1).remote(
        pipeline.JobSpec(inputs=[], settings=RunSettings(quality="proxy").key()))
    ray.get(actor.__ray_ready__.remote())
    t.append(("one Ray actor with its engine", time.perf_counter()))
    ray.shutdown()
print(json.dumps([(name, b - a) for (_, a), (name, b) in zip(t, t[1:])]))
'''


def phases(mode: str) -> list:
    out = subprocess.run([sys.executable, "-c", PHASES, mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(cmd) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    runs = [phases("ray") for _ in range(RUNS)]
    print(f"phases, each in a fresh process (median of {RUNS}):")
    for i, (name, _) in enumerate(runs[0]):
        print(f"  {name:<40} {statistics.median(r[i][1] for r in runs):6.2f} s")
    clip = kit(n_clips=1, duration_s=2.0, size=256).video("clip_00")
    tmp = Path(tempfile.mkdtemp(prefix="theval-bench-startup-"))
    cache = tmp / "cache.sqlite"

    def run(label, *extra):
        return timed([THEVAL, "evaluate", "--gt", str(clip), "--out", str(tmp / f"{label}-{time.monotonic_ns()}"),
                      "--quality", "proxy", "--quiet", *extra])
    run("fill", "--cache", str(cache))
    sides = {"inline (default)": [], "--ray": [], "from the cache": []}
    for _ in range(RUNS):
        sides["inline (default)"].append(run("inline", "--no-cache"))
        sides["--ray"].append(run("ray", "--no-cache", "--ray"))
        sides["from the cache"].append(run("cached", "--cache", str(cache)))
    base = statistics.median(sides["--ray"])
    print("theval evaluate, one 2 s clip at 256 px, start to exit (median of 3, alternating):")
    for label, times in sides.items():
        print(f"  {label:<18} {statistics.median(times):6.2f} s   {base / statistics.median(times):5.2f}x faster than --ray")


if __name__ == "__main__":
    main()
