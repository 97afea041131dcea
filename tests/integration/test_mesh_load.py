"""A bounded load test on loopback: 16 concurrent clients for 60 s against the evaluator with
short clips. Zero errors allowed; throughput and latency percentiles are printed."""
import threading
import time

import grpc
import numpy as np
import pytest

from tests.support.mesh_support import Mesh, sample, scrape
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow
CLIENTS, SECONDS = 16, 60.0


@pytest.fixture(scope="module")
def mesh_and_clips(tmp_path_factory):
    kit = generate_kit(tmp_path_factory.mktemp("clips"), seed=2, n_clips=4, duration_s=1.5, size=128, variants=())
    # A worker per client: calls beyond the workers are refused (RESOURCE_EXHAUSTED), not queued.
    workers = ["--workers", str(CLIENTS)]
    mesh = Mesh(tmp_path_factory.mktemp("mesh"), roots=[kit.out_dir], evaluator_args=workers,
                service_args={d: workers for d in DEPENDENCIES}).start()
    yield mesh, kit.videos()
    mesh.stop()


def test_16_clients_for_60_seconds_without_an_error(mesh_and_clips, figure):
    mesh, clips = mesh_and_clips
    contents = [c.read_bytes() for c in clips]
    latencies, errors, lock = [], [], threading.Lock()
    stop_at = time.monotonic() + SECONDS

    def client(k):
        i = k
        while time.monotonic() < stop_at:
            start = time.monotonic()
            try:  # half the calls send a URI, half the bytes
                if i % 2:
                    mesh.evaluate(clips[i % len(clips)], timeout=120)
                else:
                    mesh.evaluate(content=contents[i % len(clips)], timeout=120)
                with lock:
                    latencies.append(time.monotonic() - start)
            except grpc.RpcError as err:
                with lock:
                    errors.append(f"{err.code().name}: {err.details()}")
            i += 1

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=SECONDS + 180)
    elapsed = time.monotonic() - began
    assert not any(t.is_alive() for t in threads), "a client hung"
    assert errors == [], errors[:5]
    p50, p99 = np.percentile(latencies, [50, 99])
    report = (f"mesh load test: {CLIENTS} clients, {elapsed:.0f} s, {len(latencies)} videos "
              f"({clips[0].name}: 1.5 s, 128 px), {len(latencies) / elapsed:.2f} videos/s, "
              f"p50 {p50:.2f} s, p99 {p99:.2f} s, 0 errors")
    figure(report)
    metrics = scrape(mesh.procs["evaluator"].metrics_url)
    assert sample(metrics, "theval_videos_scored_total", outcome="ok") >= len(latencies)
    assert sample(metrics, "theval_grpc_in_flight_requests", service="evaluator",
                  method="/theval.v1.EvaluatorService/Evaluate") == 0
