"""What each mesh service uses while it scores: the figures behind the Kubernetes requests and limits.

Starts the mesh as `theval serve` processes, streams the clips through the evaluator (its default
concurrency), and samples every service's own /metrics (process_resident_memory_bytes,
process_cpu_seconds_total) every 0.2 s. Prints, per service: RSS when idle after start-up, peak RSS
while scoring, and CPU seconds per video (CPU time, not wall time: it holds on a busy machine).

MODE: proxy (the training-free quality proxy), paper (the paper's quality models in process) or
triton (quality and audio models on a local Triton: its process tree is measured too). The
published weights cannot be fetched here: paper and triton load FAKE weights (the real
architectures with random weights, tests/support/fake_weights.py), so memory and compute are the real
models' while the scores mean nothing.

    .venv/bin/python bench/resources.py [CLIPS] [SECONDS] [SIZE] [MODE]

k8s/base/*.yaml cite the run recorded in docs/benchmarks.md ("Kubernetes resources").
"""
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import kit  # first: puts the repository's root on sys.path (tests.support)

from tests.support.mesh_support import Mesh, scrape  # the tests' process mesh
from theval_mesh.rpc.config import SERVICES
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc

MIB = 1024 ** 2


def usage(mesh: Mesh) -> dict:
    out = {}
    for s in SERVICES:
        samples = scrape(mesh.procs[s].metrics_url)
        out[s] = (samples[("process_resident_memory_bytes", frozenset())],
                  samples[("process_cpu_seconds_total", frozenset())])
    return out


def tree_usage(pid: int) -> tuple[float, float]:
    """(RSS, CPU seconds) of a process and its children (Triton: tritonserver and its Python stubs)."""
    import psutil
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    rss = cpu = 0.0
    for p in procs:
        try:
            rss += p.memory_info().rss
            t = p.cpu_times()
            cpu += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return rss, cpu


def main():
    n, seconds, size = (int(sys.argv[1]) if len(sys.argv) > 1 else 4, float(sys.argv[2]) if len(sys.argv) > 2 else 6.0,
                        int(sys.argv[3]) if len(sys.argv) > 3 else 512)
    mode = sys.argv[4] if len(sys.argv) > 4 else "proxy"
    k = kit(n_clips=n, duration_s=seconds, size=size)
    clips = k.videos("gt")
    work = Path(tempfile.mkdtemp(prefix="theval-bench-resources-"))
    service_args, triton = {}, None
    if mode in ("paper", "triton"):
        from tests.support.fake_weights import write_fake_store
        store = write_fake_store(work / "weights")
        service_args["quality"] = ["--weights-store", str(store)]
    if mode == "triton":
        from theval_mesh.rpc.triton.repository import default_repository
        from theval_mesh.rpc.triton.server import TritonServer
        triton = TritonServer(default_repository(), weights_store=store, log=open(work / "triton.log", "a")).start()
        for s in ("quality", "audio"):
            service_args[s] = service_args.get(s, []) + ["--backend", "triton", "--triton-url", triton.address]
    mesh = Mesh(work, roots=[k.out_dir], quality="proxy" if mode == "proxy" else "paper",
                service_args=service_args).start()
    try:
        idle = usage(mesh)
        if triton is not None:
            idle["triton"] = tree_usage(triton.proc.pid)
        peak = {s: rss for s, (rss, _) in idle.items()}
        done = threading.Event()

        def sample():
            while not done.wait(0.2):
                now = usage(mesh)
                if triton is not None:
                    now["triton"] = tree_usage(triton.proc.pid)
                for s, (rss, _) in now.items():
                    peak[s] = max(peak[s], rss)
        sampler = threading.Thread(target=sample)
        sampler.start()
        stub = evaluator_pb2_grpc.EvaluatorServiceStub(mesh.channel)
        requests = [evaluator_pb2.EvaluateRequest(id=str(i), video=common_pb2.VideoRef(uri=str(c)))
                    for i, c in enumerate(clips)]
        start = time.perf_counter()
        answers = list(stub.EvaluateStream(iter(requests), timeout=1800))
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        bad = [(a.id, a.detail) for a in answers if a.code or a.response.result.status != "ok"]
        assert len(answers) == len(clips) and not bad, bad
        after = usage(mesh)
        if triton is not None:
            after["triton"] = tree_usage(triton.proc.pid)
    finally:
        mesh.stop()
        if triton is not None:
            triton.close()
    what = {"proxy": "the quality proxy", "paper": "the paper's quality models in process (FAKE weights)",
            "triton": "quality and audio models on Triton (FAKE weights)"}[mode]
    print(f"{len(clips)} videos of {seconds:g} s at {size} px, {what}, one EvaluateStream "
          f"(evaluator concurrency 2), {wall:.1f} s wall")
    print(f"{'service':10} {'idle RSS':>9} {'peak RSS':>9} {'CPU s/video':>12}")
    for s in list(SERVICES) + (["triton"] if triton is not None else []):
        cpu = (after[s][1] - idle[s][1]) / len(clips)
        print(f"{s:10} {idle[s][0] / MIB:6.0f} MiB {peak[s] / MIB:6.0f} MiB {cpu:12.2f}")


if __name__ == "__main__":
    main()
