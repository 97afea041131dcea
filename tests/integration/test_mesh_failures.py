"""Health transitions, dependencies killed and restarted (real process kills), graceful stops.
The tests of this module share one mesh and run in order."""
import signal
import threading
import time

import grpc
import pytest

from tests.support.mesh_support import Mesh, free_port, wait_in_flight
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow
C = grpc.StatusCode


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    kit = generate_kit(tmp_path_factory.mktemp("kit"), seed=5, n_clips=2, duration_s=3.0, size=256, variants=())
    return kit


@pytest.fixture(scope="module")
def mesh(clips, tmp_path_factory):
    # Fixed ports: the evaluator is told where its dependencies WILL be, and a restarted
    # service comes back at the same address.
    ports = {d: free_port() for d in DEPENDENCIES}
    m = Mesh(tmp_path_factory.mktemp("mesh"), roots=[clips.out_dir], ports=ports,
             evaluator_args=["--retries", "15", "--concurrency", "2"])  # ~12 s of retries
    yield m
    m.stop()


def code_of(call):
    try:
        call()
        return C.OK, ""
    except grpc.RpcError as err:
        return err.code(), err.details()


def test_the_evaluator_is_not_serving_until_its_dependencies_are(clips, mesh):
    mesh.start_evaluator(wait=False)
    evaluator = mesh.procs["evaluator"]
    assert evaluator.health() == "NOT_SERVING"
    # A short deadline ends the retries early; the last error is the answer.
    code, detail = code_of(lambda: mesh.evaluate(clips.videos()[0], timeout=2))
    assert code == C.UNAVAILABLE and "unavailable" in detail, detail
    mesh.start_dependencies()
    evaluator.wait_for("SERVING", timeout=60)
    assert mesh.evaluate(clips.videos()[0]).result.status == "ok"


def test_a_killed_dependency_makes_the_evaluator_not_serving_until_it_is_back(clips, mesh):
    evaluator, landmarks = mesh.procs["evaluator"], mesh.procs["landmarks"]
    landmarks.proc.send_signal(signal.SIGKILL)
    landmarks.proc.wait()
    evaluator.wait_for("NOT_SERVING", timeout=10)
    code, detail = code_of(lambda: mesh.evaluate(clips.videos()[0], timeout=2))
    assert code == C.UNAVAILABLE and "landmarks" in detail, detail
    assert evaluator.health() == "NOT_SERVING"  # ... and it still answers
    landmarks.start()  # same port
    evaluator.wait_for("SERVING", timeout=60)
    assert mesh.evaluate(clips.videos()[0]).result.status == "ok"


def test_a_dependency_killed_during_a_stream(clips, mesh):
    """The videos in flight fail with UNAVAILABLE or succeed after a retry (the evaluator retries
    for ~12 s here, longer than a restart); the others complete; the stream ends."""
    n = 8
    requests = [evaluator_pb2.EvaluateRequest(id=str(i), video=common_pb2.VideoRef(uri=str(clips.videos()[i % 2])))
                for i in range(n)]
    quality = mesh.procs["quality"]
    answers, restart = [], None
    start = time.monotonic()
    for answer in mesh.evaluator.EvaluateStream(iter(requests), timeout=180):
        answers.append(answer)
        if restart is None:
            quality.proc.send_signal(signal.SIGKILL)  # while the next videos are in flight
            quality.proc.wait()
            restart = threading.Thread(target=quality.start)  # same port
            restart.start()
    restart.join()
    assert time.monotonic() - start < 180
    assert sorted(a.id for a in answers) == sorted(r.id for r in requests)
    codes = [a.code for a in answers]
    assert set(codes) <= {C.OK.value[0], C.UNAVAILABLE.value[0]}, [(a.code, a.detail) for a in answers]
    assert codes.count(C.OK.value[0]) >= n - 2, [(a.code, a.detail) for a in answers]  # 2 in flight at most
    for a in answers:
        if a.code:
            assert "quality" in a.detail
    mesh.procs["evaluator"].wait_for("SERVING", timeout=60)


def test_sigterm_lets_the_calls_in_flight_finish(clips, mesh):
    landmarks = mesh.procs["landmarks"]
    call = mesh.evaluator.Evaluate.future(
        evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=str(clips.videos()[0]))), timeout=60)
    wait_in_flight(landmarks, "/theval.v1.LandmarksService/Track")
    landmarks.proc.send_signal(signal.SIGTERM)
    assert call.result().result.status == "ok"  # no retry could have saved it: it is not restarted
    assert landmarks.proc.wait(30) == 0
    landmarks.start()
    mesh.procs["evaluator"].wait_for("SERVING", timeout=60)


def test_the_evaluator_stops_gracefully_and_keeps_its_references(clips, mesh):
    evaluator = mesh.procs["evaluator"]
    mesh.evaluator.CreateReference(evaluator_pb2.CreateReferenceRequest(
        name="gt", videos=[common_pb2.VideoRef(uri=str(v)) for v in clips.videos()]), timeout=120)
    call = mesh.evaluator.Evaluate.future(
        evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=str(clips.videos()[1])), reference="gt",
                                      model="m"), timeout=60)
    wait_in_flight(evaluator, "/theval.v1.EvaluatorService/Evaluate")
    evaluator.proc.send_signal(signal.SIGTERM)
    assert call.result().scores.reference == "gt"
    assert evaluator.proc.wait(30) == 0
    mesh.channel.close()
    mesh.start_evaluator()  # same port, same store
    refs = mesh.evaluator.ListReferences(evaluator_pb2.ListReferencesRequest(), timeout=10).references
    assert [(r.name, r.scored) for r in refs] == [("gt", 2)]
    board = mesh.evaluator.GetLeaderboard(evaluator_pb2.GetLeaderboardRequest(reference="gt"), timeout=10)
    assert [r.model for r in board.rows] == ["gt", "m"]
