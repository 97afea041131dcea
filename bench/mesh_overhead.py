"""Per-video latency through the gRPC mesh vs the embedded engine: same clips, same run.

The mesh runs as real processes on loopback (`theval serve` x 5, as `theval mesh up` starts
them); videos are scored one at a time both ways, alternating, after a warm-up of each. The
mesh decodes twice (landmarks and quality services) and moves landmarks over gRPC, but runs
audio beside landmarks and head pose beside quality. Target: overhead under 15 %.

    .venv/bin/python bench/mesh_overhead.py [CLIPS] [SECONDS] [SIZE]
"""
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
from common import kit

from theval_mesh.core.engine import Engine
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.rpc.launcher import ServiceProcess, stop_all
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc

ROUNDS = 3


def start_mesh(root: Path, logs: Path) -> list[ServiceProcess]:
    common = ["--allow-root", str(root)]
    procs = {d: ServiceProcess(d, ([] if d == "headpose" else common) + (["--quality", "proxy"] if d == "quality" else []),
                               stderr=open(logs / f"{d}.log", "w")).spawn(0, 0) for d in DEPENDENCIES}
    for p in procs.values():
        p.wait_listening()
    deps = [a for d in DEPENDENCIES for a in (f"--{d}-addr", procs[d].address)]
    procs["evaluator"] = ServiceProcess("evaluator", common + ["--quality", "proxy", "--store", str(logs / "s.sqlite")]
                                        + deps, stderr=open(logs / "evaluator.log", "w")).start()
    for p in procs.values():
        p.wait_for("SERVING")
    return list(procs.values())


def main():
    n, seconds, size = (int(sys.argv[1]) if len(sys.argv) > 1 else 3, float(sys.argv[2]) if len(sys.argv) > 2 else 6.0,
                        int(sys.argv[3]) if len(sys.argv) > 3 else 256)
    k = kit(n_clips=n, duration_s=seconds, size=size)
    settings = RunSettings(quality="proxy")
    logs = Path(tempfile.mkdtemp(prefix="theval-bench-mesh-"))
    procs = start_mesh(k.out_dir, logs)
    try:
        channel = grpc.insecure_channel(procs[-1].address, options=[("grpc.max_send_message_length", 1 << 30)])
        stub = evaluator_pb2_grpc.EvaluatorServiceStub(channel)
        engine = Engine(settings)

        def embedded(path):
            return engine.score_video(path).metrics

        def mesh(path, as_bytes=False):
            ref = common_pb2.VideoRef(content=path.read_bytes()) if as_bytes else common_pb2.VideoRef(uri=str(path))
            request = evaluator_pb2.EvaluateRequest(video=ref, settings=wire.settings_to_proto(settings))
            return dict(stub.Evaluate(request, timeout=600).result.metrics)

        ways = {"embedded": embedded, "mesh (uri)": mesh, "mesh (bytes)": lambda p: mesh(p, True)}
        clips = k.videos()
        for fn in ways.values():  # warm-up: models loaded, channels connected
            fn(clips[0])
        times = {w: [] for w in ways}
        for _ in range(ROUNDS):
            for path in clips:
                results = {}
                for way, fn in ways.items():
                    start = time.perf_counter()
                    results[way] = fn(path)
                    times[way].append(time.perf_counter() - start)
                assert results["mesh (uri)"] == results["embedded"] == results["mesh (bytes)"], path
    finally:
        stop_all(procs, first=("evaluator",))
    base = statistics.mean(times["embedded"])
    print(f"per-video latency, {len(clips)} clips x {ROUNDS} rounds, {seconds:g} s at {size}x{size}, "
          f"proxy quality, one video at a time (identical metrics each way)")
    print(f"{'':14s} {'mean s':>8s} {'median s':>9s} {'vs embedded':>12s}")
    for way, t in times.items():
        print(f"{way:14s} {statistics.mean(t):8.3f} {statistics.median(t):9.3f} "
              f"{statistics.mean(t) / base - 1:+12.1%}")


if __name__ == "__main__":
    main()
