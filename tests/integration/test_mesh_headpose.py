"""The mesh's head-pose service serves whichever estimator it is started with: FaceXFormer on
RetinaFace crops (EstimateVideo, the reference's way) gives the embedded engine's head motion, and
a service serving the rigid fit refuses FaceXFormer with one line naming the fix. Real `theval
serve` processes on loopback; the head-pose weights are the deterministic STAND-INS (fake_weights.py):
the numbers mean nothing, but both paths must compute the same ones. One parity clip cut to its
first FRAMES frames, each scored three times: FaceXFormer and the detector cost about two seconds
per frame on 2 cores."""
import grpc
import numpy as np
import pytest

from tests.support.mesh_support import Mesh, ServiceProcess
from tests.support.model_parity_set import clips, cut
from theval_mesh.core.engine import Engine
from theval_mesh.jobs.pipeline import check
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.launcher import free_port
from theval_mesh.rpc.v1 import common_pb2, headpose_pb2, headpose_pb2_grpc
from theval_mesh.stores.job_store import JobSpec

pytestmark = pytest.mark.slow
TAG = "_head_motion"  # the head-motion parity clips (tests/data/parity/models)
FACEXFORMER = RunSettings(quality="proxy", headpose="facexformer")
FRAMES = 5  # enough for head motion's frame-to-frame differences


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    name = clips(TAG)[0]
    return cut(name, FRAMES, tmp_path_factory.mktemp("headpose-clip") / f"{name}.mp4")


def _score(mesh, path, settings):
    response = mesh.evaluate(path, name=str(path), settings=wire.settings_to_proto(settings), timeout=900)
    return wire.result_from_proto(response.result)


def test_facexformer_through_the_mesh_gives_the_embedded_head_motion(clip, headpose_store, tmp_path):
    mesh = Mesh(tmp_path, roots=[clip.parent],
                service_args={"headpose": ["--headpose", "facexformer", "--weights-store", str(headpose_store)]})
    try:
        mesh.start()
        remote = _score(mesh, clip, FACEXFORMER)
        # auto follows what the service serves: FaceXFormer here, the same numbers
        auto = _score(mesh, clip, RunSettings(quality="proxy"))
    finally:
        mesh.stop()
    local = Engine(FACEXFORMER, str(headpose_store)).score_video(clip)
    assert local.status == remote.status == "ok", (local.reason, remote.reason)
    want = local.metrics["head_motion"]
    assert np.isfinite(want), local.nan_reasons
    for result in (remote, auto):
        assert result.metrics["head_motion"] == pytest.approx(want, rel=1e-6)
        assert result.trace["yaw"] == pytest.approx(local.trace["yaw"], rel=1e-6)
    headpose = remote.provenance["headpose"]
    assert headpose.startswith("facexformer") and "stand-in" in headpose
    assert headpose == local.provenance["headpose"] == auto.provenance["headpose"]  # GT and models compare
    assert remote.provenance["served_by"]["headpose"] == "in-process"


def test_a_rigid_fit_service_refuses_facexformer_with_the_fix(clip, tmp_path):
    """EstimateVideo and Describe(facexformer) of a rigid-fit service: FAILED_PRECONDITION naming
    the fix; Estimate (the rigid fit) and Describe(auto) answer as before."""
    service = ServiceProcess("headpose", ["--headpose", "rigid-fit", "--allow-root", str(clip.parent)],
                             stderr=open(tmp_path / "headpose.log", "a")).start(free_port(), 0)
    channel = grpc.insecure_channel(service.address)
    stub = headpose_pb2_grpc.HeadPoseServiceStub(channel)
    try:
        service.wait_for("SERVING", 120)
        asks = {
            "EstimateVideo": headpose_pb2.HeadPoseVideoRequest(video=common_pb2.VideoRef(uri=str(clip)),
                                                               settings=wire.settings_to_proto(FACEXFORMER)),
            "Describe": common_pb2.DescribeRequest(settings=wire.settings_to_proto(FACEXFORMER))}
        for method, request in asks.items():
            with pytest.raises(grpc.RpcError) as err:
                getattr(stub, method)(request, timeout=60)
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, method
            assert "--headpose facexformer" in err.value.details() and "THEVAL_HEADPOSE" in err.value.details()
            assert "\n" not in err.value.details()
        described = stub.Describe(common_pb2.DescribeRequest(settings=wire.settings_to_proto(RunSettings())), timeout=60)
        assert described.backend.startswith("facemesh-rigid-fit")
        points = np.random.default_rng(0).random((3, 478, 3)).astype(np.float32)
        request = headpose_pb2.HeadPoseRequest(width=64, height=48, num_points=478)
        wire.set_array(request, "points", points)
        assert len(wire.get_array(stub.Estimate(request, timeout=60), "yaw")) == 3
    finally:
        channel.close()
        service.terminate(30)


def test_a_job_asking_facexformer_of_a_rigid_fit_mesh_stops_before_it_starts(clip, tmp_path):
    mesh = Mesh(tmp_path, roots=[clip.parent], service_args={"headpose": ["--headpose", "rigid-fit"]})
    try:
        mesh.start()
        address = mesh.procs["evaluator"].address
        spec = JobSpec(inputs=[["GT", str(clip)]], settings=FACEXFORMER.key(), mesh=address)
        with pytest.raises(UserError) as err:
            check(spec)
        line = str(err.value)
        assert "FAILED_PRECONDITION" in line and "--headpose facexformer" in line and "\n" not in line
        # auto follows the service: the rigid fit, named so in the provenance
        check(JobSpec(inputs=[["GT", str(clip)]], settings=RunSettings(quality="proxy").key(), mesh=address))
        result = _score(mesh, clip, RunSettings(quality="proxy"))
        assert result.status == "ok" and result.provenance["headpose"].startswith("facemesh-rigid-fit")
    finally:
        mesh.stop()
