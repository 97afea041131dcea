"""Abandoned work stops and streams do not read ahead: a call past its deadline or cancelled by its
client stops decoding within seconds (the frames counter stops, the in-flight gauge drops, the log
says so), the evaluator cancels the calls it made for it, and EvaluateStream holds no more videos
than it scores. The numbers measured are printed."""
import struct
import threading
import time

import grpc
import psutil
import pytest

from tests.support.mesh_support import Mesh, sample, scrape
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, landmarks_pb2, landmarks_pb2_grpc
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow
C = grpc.StatusCode
MIB = 1 << 20
TRACK = "/theval.v1.LandmarksService/Track"
EVALUATE = "/theval.v1.EvaluatorService/Evaluate"
STREAM = "/theval.v1.EvaluatorService/EvaluateStream"
CONCURRENCY, REQUESTS, REQUEST_BYTES = 2, 24, 32 * MIB
STOP_BOUND_S = 10.0  # generous: the machine is shared; the numbers seen are printed


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory):
    """60 s of a talking face at 128 px: ~40 s of FaceMesh work on a loaded 2-core machine."""
    root = tmp_path_factory.mktemp("videos")
    return generate_kit(root, seed=5, n_clips=1, duration_s=60.0, size=128, variants=()).videos()[0]


@pytest.fixture(scope="module")
def mesh(long_clip, tmp_path_factory):
    m = Mesh(tmp_path_factory.mktemp("mesh"), roots=[long_clip.parent],
             evaluator_args=["--concurrency", str(CONCURRENCY)]).start()
    yield m
    m.stop()


def metric(mesh, service, name, **labels):
    return sample(scrape(mesh.procs[service].metrics_url), name, service=service, **labels)


def frames(mesh, service="landmarks"):
    return metric(mesh, service, "theval_frames_processed_total")


def in_flight(mesh, service, method):
    return metric(mesh, service, "theval_grpc_in_flight_requests", method=method)


def wait_until(what, condition, timeout):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.05)
    return time.monotonic()


def assert_stopped(mesh, what):
    """The landmarks frames counter no longer grows; returns its value."""
    at_stop = frames(mesh)
    time.sleep(2.0)
    assert frames(mesh) == at_stop, f"{what}: frames still counted after the call ended"
    return at_stop


def test_a_call_past_its_deadline_stops_decoding(long_clip, mesh, figure):
    landmarks = mesh.procs["landmarks"]
    request = landmarks_pb2.TrackRequest(video=common_pb2.VideoRef(uri=str(long_clip)),
                                         settings=wire.settings_to_proto(RunSettings(quality="proxy")))
    before = frames(mesh)
    with grpc.insecure_channel(landmarks.address) as channel, pytest.raises(grpc.RpcError) as err:
        landmarks_pb2_grpc.LandmarksServiceStub(channel).Track(request, timeout=5)
    deadline = time.monotonic()
    assert err.value.code() == C.DEADLINE_EXCEEDED
    ended = wait_until("Track ended", lambda: in_flight(mesh, "landmarks", TRACK) == 0, STOP_BOUND_S)
    done = assert_stopped(mesh, "Track past its deadline")
    assert 0 < done - before < 1500  # counted as it went, and stopped well before the end
    log = (mesh.tmp / "landmarks.log").read_text()
    assert "Track stopped: the caller's deadline passed" in log
    figure(f"cancellation: Track past its 5 s deadline ended {ended - deadline:.2f} s after it, "
          f"at frame {done - before:.0f} of 1500")


def test_a_cancelled_evaluate_cancels_the_calls_it_made(long_clip, mesh, figure):
    call = mesh.evaluator.Evaluate.future(
        evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=str(long_clip))), timeout=600)
    wait_until("Track called", lambda: in_flight(mesh, "landmarks", TRACK) == 1, 120)
    started = frames(mesh)
    wait_until("frames decoded", lambda: frames(mesh) > started, 30)
    call.cancel()
    cancelled = time.monotonic()
    ended = wait_until("Track cancelled by the evaluator",
                       lambda: in_flight(mesh, "landmarks", TRACK) == 0 == in_flight(mesh, "evaluator", EVALUATE),
                       STOP_BOUND_S)
    assert_stopped(mesh, "Track of a cancelled Evaluate")
    log = (mesh.tmp / "landmarks.log").read_text()
    assert "Track stopped: the caller cancelled" in log
    figure(f"cancellation: a cancelled Evaluate's Track ended {ended - cancelled:.2f} s after the cancel")


def drain(call, answered):
    """Count a stream's answers until it ends (cancelled by the test)."""
    try:
        for _ in call:
            answered[0] += 1
    except grpc.RpcError:
        pass


def padded(video: bytes, size: int) -> bytes:
    """The same video, `size` bytes long: an MP4 `free` box (skipped by demuxers) at the end."""
    pad = size - len(video) - 8
    return video + struct.pack(">I", pad + 8) + b"free" + bytes(pad)


def test_a_stream_reads_no_further_ahead_than_it_scores(long_clip, mesh, figure):
    content = padded(long_clip.read_bytes(), REQUEST_BYTES)
    evaluator = psutil.Process(mesh.procs["evaluator"].proc.pid)
    base = evaluator.memory_info().rss
    pulled, answered = [0], [0]

    def requests():
        for i in range(REQUESTS):
            pulled[0] += 1
            yield evaluator_pb2.EvaluateRequest(id=str(i), video=common_pb2.VideoRef(content=content))

    call = mesh.evaluator.EvaluateStream(requests(), timeout=600)
    threading.Thread(target=drain, args=(call, answered), daemon=True).start()
    wait_until("scoring started", lambda: in_flight(mesh, "landmarks", TRACK) >= 1, 120)
    peak, end = base, time.monotonic() + 15
    while time.monotonic() < end:
        peak = max(peak, evaluator.memory_info().rss)
        time.sleep(0.1)
    read, done = pulled[0], answered[0]
    call.cancel()
    figure(f"read-ahead: {REQUESTS} requests of {REQUEST_BYTES // MIB} MiB offered, {read} taken from the "
          f"client's iterator while {CONCURRENCY} were scored ({done} answered); evaluator RSS "
          f"{base / MIB:.0f} MiB -> peak {peak / MIB:.0f} MiB (+{(peak - base) / MIB:.0f} MiB)")
    # Those answered and those being scored, plus the one the client's gRPC is trying to send
    # (none sits unread in the evaluator). Unbounded, all 24 were taken at once.
    assert read <= done + CONCURRENCY + 1
    # Each video scored is held a few times over (the request, the copies sent to the services).
    assert peak - base < (CONCURRENCY + 1) * REQUEST_BYTES * 6, "RSS beyond what the videos scored explain"
    wait_until("the stream's work stopped",
               lambda: in_flight(mesh, "landmarks", TRACK) == 0 == in_flight(mesh, "evaluator", STREAM), STOP_BOUND_S)
