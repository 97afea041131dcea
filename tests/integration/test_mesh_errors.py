"""Bad input over the wire gets the right status code and a clear detail, and the server keeps
serving; deadlines, streams, health, reflection and Prometheus counters."""
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from mesh_support import Mesh, sample, scrape
from theval_mesh.api.v1 import common_pb2, evaluator_pb2, quality_pb2_grpc
from theval_mesh.common.launcher import ServiceProcess
from theval_mesh.orchestrator.settings import RunSettings
from theval_mesh.servicers import wire
from theval_mesh.synth import generate_kit, write_bad_inputs

pytestmark = pytest.mark.slow
LIMIT = 1 << 20  # --max-video-bytes of this module's evaluator
C = grpc.StatusCode
EVALUATE = "/theval.v1.EvaluatorService/Evaluate"


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    kit = generate_kit(root / "kit", seed=3, n_clips=2, duration_s=1.5, size=128, variants=())
    bad = write_bad_inputs(root / "bad", size=256, duration_s=2.0)  # 256 px: over this mesh's 200 px limit
    outside = tmp_path_factory.mktemp("elsewhere") / "clip.mp4"
    outside.write_bytes(kit.videos()[0].read_bytes())
    return {"root": root, "good": kit.videos(), "bad": bad, "outside": outside}


@pytest.fixture(scope="module")
def mesh(clips, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mesh")
    (tmp / "no-weights").mkdir()
    m = Mesh(tmp, roots=[clips["root"]],
             evaluator_args=["--max-video-bytes", str(LIMIT), "--max-side-px", "200"],
             service_args={"quality": ["--weights-store", str(tmp / "no-weights")]}).start()
    yield m
    m.stop()


def expect(code, call):
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, err.value.details()
    return err.value.details()


def test_bad_inputs_get_their_status_code_and_the_server_keeps_serving(clips, mesh):
    good, bad, root = clips["good"][0], clips["bad"], clips["root"]
    cases = [
        (C.INVALID_ARGUMENT, dict(content=b"\x00\x01 not a video" * 100), "not a readable video"),
        (C.INVALID_ARGUMENT, dict(content=good.read_bytes()[:5000]), "video"),
        (C.INVALID_ARGUMENT, dict(content=b""), "empty video (0 bytes)"),
        (C.INVALID_ARGUMENT, dict(uri=bad["corrupt"]), "not a readable video"),
        (C.INVALID_ARGUMENT, dict(uri=bad["not_a_video"]), "not a readable video"),
        (C.INVALID_ARGUMENT, dict(uri=root / "missing.mp4"), "file not found"),
        (C.RESOURCE_EXHAUSTED, dict(content=b"x" * (LIMIT + 1)), f"over the {LIMIT}-byte limit"),
        (C.RESOURCE_EXHAUSTED, dict(content=b"x" * (3 * LIMIT)), "larger than max"),  # refused by gRPC itself
        (C.RESOURCE_EXHAUSTED, dict(uri=bad["no_face"]), "over the 200 px limit"),
        (C.PERMISSION_DENIED, dict(uri=clips["outside"]), "outside the folders this server may read"),
        (C.PERMISSION_DENIED, dict(uri=f"{root}/../{clips['outside'].parent.name}/clip.mp4"), "outside"),
        (C.PERMISSION_DENIED, dict(uri="file:///etc/passwd"), "outside"),
        (C.INVALID_ARGUMENT, dict(uri="http://127.0.0.1/clip.mp4"), "scheme 'http' is not supported"),
        (C.INVALID_ARGUMENT, dict(uri="clips/clip.mp4"), "must be absolute"),
        (C.NOT_FOUND, dict(uri=good, reference="no-such-set"), "no GT reference set named 'no-such-set'"),
        (C.INVALID_ARGUMENT, dict(uri=good, settings=common_pb2.RunSettings(profile="nope")), "profile"),
    ]
    for code, request, detail in cases:
        detail_seen = expect(code, lambda: mesh.evaluate(**request))
        assert detail in detail_seen, (request.get("uri"), detail_seen)
        # ... and the next valid call is served
        assert mesh.evaluate(clips["good"][1]).result.status == "ok"


def test_missing_weights_are_a_failed_precondition(clips, mesh):
    paper = wire.settings_to_proto(RunSettings(quality="paper"))
    detail = expect(C.FAILED_PRECONDITION, lambda: mesh.evaluate(clips["good"][0], settings=paper))
    assert "weights missing" in detail and "theval weights" in detail
    assert mesh.evaluate(clips["good"][0]).result.status == "ok"


def test_a_quality_service_without_its_weights_is_not_serving(tmp_path):
    (tmp_path / "empty").mkdir()
    quality = ServiceProcess("quality", ["--allow-root", str(tmp_path), "--quality", "paper",
                                         "--weights-store", str(tmp_path / "empty")],
                             stderr=open(tmp_path / "quality.log", "w")).start()
    try:
        with grpc.insecure_channel(quality.address) as channel:
            stub = quality_pb2_grpc.QualityServiceStub(channel)
            detail = expect(C.FAILED_PRECONDITION, lambda: stub.Describe(common_pb2.DescribeRequest(), timeout=30))
            assert "weights missing" in detail
        assert quality.health() == "NOT_SERVING"
        assert "cannot load" in (tmp_path / "quality.log").read_text()
    finally:
        quality.terminate()


def test_a_deadline_shorter_than_the_work_is_deadline_exceeded(clips, mesh):
    expect(C.DEADLINE_EXCEEDED, lambda: mesh.evaluate(clips["good"][0], timeout=0.05))
    assert mesh.evaluate(clips["good"][0]).result.status == "ok"


def test_a_stream_answers_every_video_with_its_own_code(clips, mesh):
    good = clips["good"]
    requests = [
        evaluator_pb2.EvaluateRequest(id="a", video=common_pb2.VideoRef(uri=str(good[0]))),
        evaluator_pb2.EvaluateRequest(id="b", video=common_pb2.VideoRef(content=b"garbage" * 50)),
        evaluator_pb2.EvaluateRequest(id="c", video=common_pb2.VideoRef(uri=str(clips["outside"]))),
        evaluator_pb2.EvaluateRequest(id="d", video=common_pb2.VideoRef(uri=str(good[1])), reference="nope"),
        evaluator_pb2.EvaluateRequest(id="e", video=common_pb2.VideoRef(content=good[0].read_bytes())),
    ]
    answers = {r.id: r for r in mesh.evaluator.EvaluateStream(iter(requests), timeout=120)}
    codes = {k: C.OK if r.code == 0 else next(c for c in C if c.value[0] == r.code) for k, r in answers.items()}
    assert codes == {"a": C.OK, "b": C.INVALID_ARGUMENT, "c": C.PERMISSION_DENIED, "d": C.NOT_FOUND, "e": C.OK}
    assert answers["a"].response.result.status == "ok"
    assert answers["b"].response.result.status == "failed"  # the failed result comes with its code
    assert "not a readable video" in answers["b"].detail
    assert dict(answers["a"].response.result.metrics) == dict(answers["e"].response.result.metrics)


def test_every_service_has_health_and_reflection(mesh):
    for name, p in mesh.procs.items():
        with grpc.insecure_channel(p.address) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status
            assert status == health_pb2.HealthCheckResponse.SERVING, name
            services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
        api = {"evaluator": "EvaluatorService", "headpose": "HeadPoseService"}.get(name, f"{name.title()}Service")
        assert {f"theval.v1.{api}", "grpc.health.v1.Health"} <= services, (name, services)


def test_prometheus_counters_match_the_calls_made(clips, mesh):
    urls = {n: p.metrics_url for n, p in mesh.procs.items()}
    before = {n: scrape(u) for n, u in urls.items()}
    ok = [mesh.evaluate(clips["good"][i % 2]).result for i in range(3)]
    expect(C.INVALID_ARGUMENT, lambda: mesh.evaluate(content=b"not a video"))
    expect(C.NOT_FOUND, lambda: mesh.evaluate(clips["good"][0], reference="none"))
    after = {n: scrape(u) for n, u in urls.items()}  # every endpoint parses with prometheus_client.parser

    def delta(process, name, **labels):
        return sample(after[process], name, **labels) - sample(before[process], name, **labels)

    ev = dict(service="evaluator", method=EVALUATE)
    assert delta("evaluator", "theval_grpc_requests_total", code="OK", **ev) == 3
    assert delta("evaluator", "theval_grpc_requests_total", code="INVALID_ARGUMENT", **ev) == 1
    assert delta("evaluator", "theval_grpc_requests_total", code="NOT_FOUND", **ev) == 1
    assert delta("evaluator", "theval_grpc_request_seconds_count", **ev) == 5
    assert delta("evaluator", "theval_videos_scored_total", outcome="ok") == 3
    assert delta("evaluator", "theval_videos_scored_total", outcome="failed") == 1
    assert sample(after["evaluator"], "theval_grpc_in_flight_requests", **ev) == 0
    frames = sum(r.frames_total for r in ok)
    for service, method in (("landmarks", "LandmarksService/Track"), ("quality", "QualityService/Score"),
                            ("audio", "AudioService/Analyse"), ("headpose", "HeadPoseService/Estimate")):
        m = dict(service=service, method=f"/theval.v1.{method}")
        assert delta(service, "theval_grpc_requests_total", code="OK", **m) == 3, service
    assert delta("landmarks", "theval_frames_processed_total", service="landmarks") == frames
    assert delta("quality", "theval_frames_processed_total", service="quality") == frames
    assert delta("audio", "theval_model_inference_seconds_count", service="audio", model="silero-vad") == 3
    assert any(k[0] == "theval_model_inference_seconds_count" and ("service", "landmarks") in k[1]
               for k in after["landmarks"])
    assert sample(after["evaluator"], "theval_dependency_up", dependency="quality") == 1
