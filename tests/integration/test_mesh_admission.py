"""Admission control of the evaluator under slow and idle clients: idle streams beyond the stream
limit and calls beyond the workers are refused at once with RESOURCE_EXHAUSTED, health checks and
reflection answer whatever the load, idle streams are closed, and no stream outlives its maximum.
The numbers measured are printed (timed outcomes are asserted with generous bounds only)."""
import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from tests.support.mesh_support import Mesh, sample, scrape
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow
C = grpc.StatusCode
SERVING = health_pb2.HealthCheckResponse.SERVING
WORKERS, STREAMS, IDLE_S, MAX_S = 8, 4, 25.0, 40.0
IDLE_CLIENTS, WATCHERS, NORMAL_CLIENTS, LOAD_S = 12, 6, 6, 10.0
EVALUATE = "/theval.v1.EvaluatorService/Evaluate"
STREAM = "/theval.v1.EvaluatorService/EvaluateStream"


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    short = generate_kit(root / "short", seed=4, n_clips=2, duration_s=1.5, size=128, variants=()).videos()
    long = generate_kit(root / "long", seed=5, n_clips=1, duration_s=60.0, size=128, variants=()).videos()[0]
    return {"root": root, "short": short, "long": long}


@pytest.fixture(scope="module")
def mesh(clips, tmp_path_factory):
    m = Mesh(tmp_path_factory.mktemp("mesh"), roots=[clips["root"]],
             evaluator_args=["--workers", str(WORKERS), "--stream-limit", str(STREAMS),
                             "--stream-idle-s", str(IDLE_S), "--stream-max-s", str(MAX_S)]).start()
    yield m
    m.stop()


def in_flight(mesh, method, service="evaluator"):
    return sample(scrape(mesh.procs[service].metrics_url), "theval_grpc_in_flight_requests",
                  service=service, method=method)


def wait_until(what, condition, timeout=60.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.1)


class IdleStream:
    """An EvaluateStream that never sends a request; `outcome` once the server ends it."""

    def __init__(self, mesh):
        self.release, self.outcome = threading.Event(), None
        self.opened = time.monotonic()
        self.call = mesh.evaluator.EvaluateStream(self._nothing(), timeout=120)
        threading.Thread(target=self._wait, daemon=True).start()

    def _nothing(self):
        self.release.wait()
        return
        yield

    def _wait(self):
        try:
            for _ in self.call:
                pass
            self.outcome = (C.OK, "", time.monotonic() - self.opened)
        except grpc.RpcError as err:
            self.outcome = (err.code(), err.details(), time.monotonic() - self.opened)


def test_idle_streams_and_slow_calls_leave_health_and_normal_calls_answering(clips, mesh, figure):
    health = health_pb2_grpc.HealthStub(mesh.channel)
    watches = [health.Watch(health_pb2.HealthCheckRequest(), timeout=120) for _ in range(WATCHERS)]
    assert all(next(w).status == SERVING for w in watches)

    idle = [IdleStream(mesh) for _ in range(IDLE_CLIENTS)]
    wait_until("the streams over the limit refused", lambda: sum(s.outcome is not None for s in idle)
               == IDLE_CLIENTS - STREAMS, timeout=30)
    wait_until("the streams within the limit open", lambda: in_flight(mesh, STREAM) == STREAMS)
    held = [s for s in idle if s.outcome is None]
    refused = [s.outcome for s in idle if s.outcome is not None]
    assert {code for code, _, _ in refused} == {C.RESOURCE_EXHAUSTED}, refused
    assert all("streaming calls are open" in detail for _, detail, _ in refused), refused[0]

    long = common_pb2.VideoRef(uri=str(clips["long"]))
    slow = [mesh.evaluator.Evaluate.future(evaluator_pb2.EvaluateRequest(video=long), timeout=300) for _ in range(2)]
    wait_until("the slow calls running", lambda: in_flight(mesh, EVALUATE) == 2)

    stop_at = time.monotonic() + LOAD_S
    checks, normal, lock = [], [], threading.Lock()

    def check_health():
        while time.monotonic() < stop_at:
            start = time.monotonic()
            status = health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
            with lock:  # with how many idle streams held open at that moment
                checks.append((status, time.monotonic() - start, sum(s.outcome is None for s in held)))
            time.sleep(0.2)

    def normal_client(k):
        i = k
        while time.monotonic() < stop_at:
            start = time.monotonic()
            try:
                mesh.evaluate(clips["short"][i % 2], timeout=120)
                outcome = (C.OK, "")
            except grpc.RpcError as err:
                outcome = (err.code(), err.details())
            with lock:
                normal.append((*outcome, time.monotonic() - start))
            i += 1
            time.sleep(0.1)

    threads = [threading.Thread(target=check_health)] + \
        [threading.Thread(target=normal_client, args=(k,)) for k in range(NORMAL_CLIENTS)]
    for t in threads:
        t.start()
    services = set(ProtoReflectionDescriptorDatabase(mesh.channel).get_services())  # reflection, under load
    for t in threads:
        t.join(timeout=LOAD_S + 180)
    assert not any(t.is_alive() for t in threads), "a client hung"
    for call in slow:
        call.cancel()

    assert "theval.v1.EvaluatorService" in services
    assert checks and all(status == SERVING for status, _, _ in checks)
    while_held = [t for _, t, n in checks if n == STREAMS]
    assert while_held  # health answered SERVING while every idle stream the limit allows was open
    codes = {code for code, _, _ in normal}
    assert codes <= {C.OK, C.RESOURCE_EXHAUSTED}, normal
    assert C.OK in codes
    busy = [t for code, detail, t in normal if code == C.RESOURCE_EXHAUSTED]
    assert all("workers are all serving calls" in d for c, d, _ in normal if c == C.RESOURCE_EXHAUSTED)

    # The idle streams within the limit are closed after IDLE_S, with a clear status.
    wait_until("the idle streams closed", lambda: all(s.outcome is not None for s in idle), timeout=IDLE_S + 30)
    closed = [s.outcome for s in held]
    assert len(closed) == STREAMS
    assert all(code == C.DEADLINE_EXCEEDED and "idle stream closed" in detail for code, detail, _ in closed), closed
    assert all(t >= IDLE_S - 1 for _, _, t in closed), closed
    for s in idle:
        s.release.set()
    for w in watches:
        w.cancel()
    wait_until("every call over", lambda: in_flight(mesh, EVALUATE) == 0 == in_flight(mesh, STREAM))
    assert mesh.evaluate(clips["short"][0]).result.status == "ok"

    ok = [t for code, _, t in normal if code == C.OK]
    latencies = [t for _, t, _ in checks]
    figure(f"admission: {IDLE_CLIENTS} idle streams: {STREAMS} held, {len(refused)} refused in "
          f"{max(t for _, _, t in refused):.3f} s at most; {WATCHERS} health watchers; 2 slow calls (60 s video); "
          f"{NORMAL_CLIENTS} normal clients for {LOAD_S:.0f} s: {len(ok)} ok (p50 {np.median(ok):.2f} s, "
          f"max {max(ok):.2f} s), {len(busy)} refused (max {max(busy, default=0):.3f} s); "
          f"{len(checks)} health checks all SERVING ({len(while_held)} with {STREAMS} idle streams held; p50 "
          f"{1000 * np.median(latencies):.1f} ms, max {1000 * max(latencies):.1f} ms); idle streams closed after "
          f"{min(t for _, _, t in closed):.1f}-{max(t for _, _, t in closed):.1f} s")


def test_a_stream_is_closed_at_its_maximum_lifetime(mesh):
    """A busy stream (a request every 2 s, each answered at once) is still ended at MAX_S."""
    answers, stop = [], threading.Event()

    def requests():
        for i in range(int(3 * MAX_S)):
            if stop.wait(0 if i == 0 else 2.0):
                return
            yield evaluator_pb2.EvaluateRequest(id=str(i), video=common_pb2.VideoRef(content=b"not a video"))

    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        for answer in mesh.evaluator.EvaluateStream(requests(), timeout=3 * MAX_S):
            answers.append(answer)
    elapsed = time.monotonic() - start
    stop.set()
    assert err.value.code() == C.DEADLINE_EXCEEDED, err.value.details()
    assert "the longest allowed" in err.value.details()
    # Ended by the server's limit ("the longest allowed"), not the client's deadline; never before it.
    # No upper bound on the clock: a busy machine only delays when the limit is seen.
    assert elapsed >= MAX_S - 1, elapsed
    assert len(answers) >= 5 and all(a.code == C.INVALID_ARGUMENT.value[0] for a in answers)
