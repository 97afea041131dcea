"""Bad input over the wire gets the right status code and a clear detail, and the server keeps
serving; deadlines, streams, health, reflection and Prometheus counters."""

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from tests.support.mesh_support import Mesh, sample, scrape
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.config import Config
from theval_mesh.rpc.launcher import ServiceProcess
from theval_mesh.rpc.servicers.common import request_limit
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, headpose_pb2, headpose_pb2_grpc, quality_pb2, quality_pb2_grpc
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
        detail_seen = expect(code, lambda request=request: mesh.evaluate(**request))
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


# ---------------------------------------------------------------- findings of the security probe
# Each leaf's largest request (rpc.servicers.common.request_limit) with the defaults its process has.
LEAVES = {"headpose": ("HeadPoseService/Estimate", {"video": False, "series": 1}),
          "quality": ("QualityService/Score", {"video": True, "series": 2}),
          "landmarks": ("LandmarksService/Track", {"video": True, "frame_lists": 1}),
          "audio": ("AudioService/Analyse", {"video": True})}


def peak_rss(process: ServiceProcess) -> int:
    """The process's peak resident memory (VmHWM), bytes."""
    with open(f"/proc/{process.proc.pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def message_of_size(size: int) -> bytes:
    """A serialized message of exactly `size` bytes: one unknown field of zeros (field 100)."""
    tag = wire._varint(100 << 3 | 2)
    for width in range(1, 11):  # the bytes of the length's varint
        n = size - len(tag) - width
        if len(wire._varint(n)) == width:
            return tag + wire._varint(n) + bytes(n)


@pytest.mark.parametrize("service", LEAVES)
def test_a_request_over_a_leaf_s_limit_is_refused_unread(clips, mesh, service):
    """The leaves took up to max_message_bytes (1 GiB): two 900 MiB calls took one to 4.1 GB."""
    method, parts = LEAVES[service]
    limit = request_limit(Config(service=service, host="127.0.0.1", port=0, metrics_port=0), **parts)
    process = mesh.procs[service]
    before = peak_rss(process)
    with grpc.insecure_channel(process.address, options=[("grpc.max_send_message_length", -1)]) as channel:
        call = channel.unary_unary(f"/theval.v1.{method}")  # bytes in, bytes out
        detail = expect(C.RESOURCE_EXHAUSTED, lambda: call(message_of_size(limit + 1), timeout=120))
    assert f"larger than max ({limit + 1} vs. {limit})" in detail
    assert peak_rss(process) - before < limit / 4  # refused as it arrived, never held whole
    assert mesh.evaluate(clips["good"][0]).result.status == "ok"  # ... and a normal request passes


def face_rows(frames, points=478):
    return np.random.default_rng(0).random((frames, points, 3)).astype(np.float32)


def malformed_points():
    """(case, points, num_points, what the detail says): arrays FaceMesh cannot produce."""
    def with_value(v):
        p = face_rows(3)
        p[1, 7, 1] = v
        return p
    return [("point count", face_rows(3, 10), 10, "num_points is 10"),
            ("inf", with_value(np.inf), 478, "inf is not a normalised coordinate"),
            ("NaN", with_value(np.nan), 478, "NaN beside coordinates"),
            ("1e30", with_value(1e30), 478, "1e+30 is not a normalised coordinate"),
            ("not whole rows", face_rows(3).reshape(-1)[:-2], 478, "need frames x points x 3")]


def test_malformed_arrays_sent_to_the_headpose_service_are_invalid_arguments(mesh):
    def request(points, num_points=478, width=64, height=64):
        m = headpose_pb2.HeadPoseRequest(width=width, height=height, num_points=num_points)
        wire.set_array(m, "points", points)
        return m
    cases = [(c, request(p, n), why) for c, p, n, why in malformed_points()] + [
        ("degenerate face", request(np.zeros((3, 478, 3))), "degenerate face shape"),
        ("no width", request(face_rows(3), width=0), "width and height must be positive")]
    with grpc.insecure_channel(mesh.procs["headpose"].address) as channel:
        stub = headpose_pb2_grpc.HeadPoseServiceStub(channel)
        for case, message, why in cases:
            detail = expect(C.INVALID_ARGUMENT, lambda message=message: stub.Estimate(message, timeout=30))
            assert why in detail and "\n" not in detail and "Traceback" not in detail, (case, detail)
        assert len(stub.Estimate(request(face_rows(3)), timeout=30).pitch) == 3  # a normal request


def test_malformed_arrays_sent_to_the_quality_service_are_invalid_arguments(clips, mesh):
    def series(name="single", frames=3, points=None, num_points=478):
        m = common_pb2.LandmarkSeries(pass_name=name, num_points=num_points, frame_index=range(frames))
        wire.set_array(m, "points", face_rows(frames, num_points) if points is None else points)
        return m

    def request(*landmarks):
        return quality_pb2.QualityRequest(video=common_pb2.VideoRef(uri=str(clips["good"][0])),
                                          landmarks=landmarks)
    cases = [(c, request(series(points=p, num_points=n)), why) for c, p, n, why in malformed_points()] + [
        ("mismatched passes", request(series(), series("mouth_quality", 2, num_points=468)),
         "'mouth_quality' (2 frames) does not cover the frames of 'single' (3)"),
        ("frames and rows", request(series(frames=4, points=face_rows(3))), "for 4 frames of 478 points")]
    with grpc.insecure_channel(mesh.procs["quality"].address) as channel:
        stub = quality_pb2_grpc.QualityServiceStub(channel)
        for case, message, why in cases:
            detail = expect(C.INVALID_ARGUMENT, lambda message=message: stub.Score(message, timeout=60))
            assert why in detail and "\n" not in detail and "Traceback" not in detail, (case, detail)
        normal = stub.Score(request(series(), series("mouth_quality", num_points=468)), timeout=60)
        assert normal.frame_count > 0
        # Valid numbers that put the mouth wholly outside the frame: no mouth there, not an error.
        off = np.full((3, 468, 3), 5.0, np.float32)
        away = stub.Score(request(series(), series("mouth_quality", points=off, num_points=468)), timeout=60)
        assert away.frame_count > 0


def test_path_edge_cases_get_a_short_error_never_an_internal_one(clips, mesh):
    """The evaluator resolves the URIs; gRPC itself refuses a URI over its receive limit (2 MiB in
    this module: --max-video-bytes 1 MiB + 1 MiB), so the long URI that reaches the code is 1.5 MB."""
    root, log = clips["root"], mesh.tmp / "evaluator.log"
    logged = log.stat().st_size
    cases = [
        (C.INVALID_ARGUMENT, f"{root}/{'n' * 300}.mp4", "304 bytes, over the file system's 255-byte limit"),
        (C.INVALID_ARGUMENT, f"{root}/{'p' * 5000}", "over the 4096-byte limit of a path"),
        (C.INVALID_ARGUMENT, str(root) + "/d" * 1100 + "/clip.mp4", "file not found"),  # 1,100 folders deep
        (C.PERMISSION_DENIED, "/d" * 1100 + "/clip.mp4", "outside the folders"),
        (C.INVALID_ARGUMENT, f"file://{root}/a%00b.mp4", "NUL byte"),
        (C.INVALID_ARGUMENT, f"{root}/a\x00b.mp4", "NUL byte"),
        (C.INVALID_ARGUMENT, "/" + "x" * 1_500_000, "the URI is 1500001 bytes, over the 4096-byte limit"),
        (C.RESOURCE_EXHAUSTED, "/" + "x" * 20_000_000, "larger than max"),
    ]
    for code, uri, why in cases:
        detail = expect(code, lambda uri=uri: mesh.evaluate(uri))
        assert why in detail and len(detail) <= 1000, (uri[:80], detail[:200])
    stream = [evaluator_pb2.EvaluateRequest(id="long", video=common_pb2.VideoRef(uri="/" + "x" * 1_500_000))]
    (answer,) = mesh.evaluator.EvaluateStream(iter(stream), timeout=60)
    assert answer.code == C.INVALID_ARGUMENT.value[0] and len(answer.detail) <= 1000
    assert log.stat().st_size - logged < 100_000  # the long URIs are not in the server log
    assert mesh.evaluate(clips["good"][0]).result.status == "ok"
