"""Triton serving: a REAL tritonserver (the nvidia-pytriton wheel's binary) with the project's
triton_models/, started by these tests on loopback ports.

The published quality weights cannot be fetched here, so Triton and the in-process path both load
FAKE weights (random weights of the real architectures, tests/support/fake_weights.py) from a temporary
store: the numbers mean nothing, but both paths must produce the same ones."""
import json
import threading
import time

import grpc
import numpy as np
import pytest

from tests.support.mesh_support import free_port, scrape, wait_in_flight
from theval_mesh.backends.audio.backend import AudioBackend, load_vad_model, speech_probabilities
from theval_mesh.backends.headpose.facexformer import FaceXFormerHeadPose
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.backends.quality import QualityBackend
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import MODELS as QUALITY_MODELS
from theval_mesh.core.frame_pass import run_frame_pass, run_headpose_pass
from theval_mesh.pure.errors import ServiceError, WeightsMissing
from theval_mesh.pure.settings import RunSettings as Settings
from theval_mesh.rpc import wire
from theval_mesh.rpc.launcher import ServiceProcess
from theval_mesh.rpc.triton.client import TritonClient, TritonFaceXFormer, TritonModels, TritonVad
from theval_mesh.rpc.triton.repository import MODELS, default_repository
from theval_mesh.rpc.triton.server import TritonServer
from theval_mesh.rpc.v1 import headpose_pb2, headpose_pb2_grpc, quality_pb2, quality_pb2_grpc
from theval_mesh.rpc.v1.common_pb2 import DescribeRequest, RunSettings, VideoRef
from theval_mesh.synth import generate_kit
from theval_mesh.synth.speech import synthesize_speech

pytestmark = pytest.mark.slow
TOLERANCE = 1e-5  # batch composition moves float32 scores by ~1e-6 (measured)


def start_triton(tmp, store, models=None, ports=None) -> TritonServer:
    server = TritonServer(default_repository(), weights_store=store, models=models,
                          log=open(tmp / "triton.log", "a"), **(ports or {}))
    return server.start()


@pytest.fixture(scope="module")
def triton_store(tmp_path_factory):
    """The quality models' and FaceXFormer's stand-ins in one store (seed 0, byte for byte the
    files of fake_store and headpose_store): Triton serves every model of its repository."""
    from tests.support.fake_weights import write_fake_store
    return write_fake_store(tmp_path_factory.mktemp("triton-weights"), headpose=True)


@pytest.fixture(scope="module")
def triton(triton_store, tmp_path_factory):
    server = start_triton(tmp_path_factory.mktemp("triton"), triton_store)
    yield server
    server.close()


@pytest.fixture(scope="module")
def client(triton):
    c = TritonClient(triton.address)
    yield c
    c.close()


def images(n, size=96, seed=0):
    """Astronaut-based RGB frames with a little noise each (distinct images, one size)."""
    import skimage.data
    import skimage.transform
    base = skimage.transform.resize(skimage.data.astronaut(), (size, size), preserve_range=True)
    rng = np.random.default_rng(seed)
    return [np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8) for _ in range(n)]


# ---------------------------------------------------------------------------- the repository loads
def test_every_model_is_ready_and_reports_what_it_loaded(triton, client, fake_store):
    states = client.states()
    assert {m: s for m, (s, _) in states.items()} == dict.fromkeys(MODELS, "READY")
    models = TritonModels(client)
    for name, qmodel in QUALITY_MODELS.items():
        described = models.describe(name)
        assert described["files"] == {f.name: ws.sha256_file(fake_store / f.name) for f in qmodel.files}
        assert described["device"] == "cpu" and described["model"] == name
    assert TritonVad(client).provenance() == AudioBackend().provenance()
    # Triton's own /metrics answers and counts per model
    samples = scrape(triton.metrics_url)
    assert any(name == "nv_inference_count_total" and ("model", "musiq") in labels for name, labels in samples)


def test_a_model_without_its_weights_is_not_ready_while_the_others_serve(fake_store, headpose_store, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    for qmodel in (QUALITY_MODELS["musiq"], QUALITY_MODELS["musiq-spaq"]):
        for f in qmodel.files:
            (store / f.name).symlink_to(fake_store / f.name)
    lost = QUALITY_MODELS["musiq"].main.name
    (store / lost).unlink()
    server = start_triton(tmp_path, store, models=["musiq", "musiq_spaq", "silero_vad"])
    c = TritonClient(server.address)
    try:
        states = c.states()
        assert states["musiq"][0] == "UNAVAILABLE"
        assert lost in states["musiq"][1] and str(store) in states["musiq"][1]
        assert states["musiq_spaq"][0] == "READY" and states["silero_vad"][0] == "READY"
        assert states["topiq_iaa"][0] == "NOT_LOADED"  # not asked for
        log = (tmp_path / "triton.log").read_text()
        assert f"musiq not loaded: quality weights missing from the store {store}: {lost}" in log
        # The others serve; the missing one fails the way a service can act on.
        scores = TritonModels(c).scores("musiq-spaq", images(2))
        assert scores.shape == (2,) and np.isfinite(scores).all()
        with pytest.raises(ServiceError) as err:
            TritonModels(c).scores("musiq", images(1))
        assert err.value.code == "UNAVAILABLE" and "musiq" in str(err.value)
        # paper mode names the reason; auto falls back to the labelled proxy and says why
        with pytest.raises(WeightsMissing, match=f"musiq is UNAVAILABLE .*{lost}"):
            QualityBackend(mode="paper", models=TritonModels(c))
        auto = QualityBackend(mode="auto", models=TritonModels(c))
        assert auto.resolved_mode == "proxy" and "musiq is UNAVAILABLE" in auto.notice
        # The head-pose service on a Triton without FaceXFormer: auto falls back to the rigid fit
        # and says why; facexformer stays NOT_SERVING with the reason (the detector's file is local).
        from theval_mesh.rpc.config import Config
        from theval_mesh.rpc.servicers.headpose import HeadPoseServicer

        def servicer(mode):
            return HeadPoseServicer(Config(service="headpose", host="127.0.0.1", port=0, metrics_port=0,
                                           backend="triton", triton_url=server.address,
                                           weights_store=str(headpose_store), run=Settings(headpose=mode)))
        rigid = servicer("auto")
        rigid.load()
        assert rigid.facexformer is None and "cannot serve facexformer: NOT_LOADED" in rigid.notice
        with pytest.raises(WeightsMissing, match="--headpose facexformer with --backend triton: .*NOT_LOADED"):
            servicer("facexformer").load()
    finally:
        c.close()
        server.close()


# ---------------------------------------------------------------------------- same numbers
@pytest.mark.parametrize("profile", ["reference", "paper"])
def test_triton_and_in_process_give_the_same_scores(client, fake_store, profile):
    import torch
    torch.set_num_threads(2)
    local = QualityBackend(mode="paper", profile=profile, store=fake_store)
    served = QualityBackend(mode="paper", profile=profile, models=TritonModels(client))
    assert served.resolved_mode == "paper" and "served by triton" in served.notice
    frames = images(3, size=256)  # the stand-in face detector's anchors are 256 px: it finds a face
    # mouth crops of several sizes: the batch pads them onto one black canvas
    crops = [f[40:40 + h, 30:30 + w] for f, (h, w) in zip(images(5, seed=1) * 2, [(20, 30), (24, 40), (18, 26)] * 4)]
    calls = {"mouth_quality": crops}
    if profile == "reference":  # global aesthetics and face quality use the same models in both profiles
        calls.update(global_aesthetic=frames[:2], face_quality=frames)
    for metric, inputs in calls.items():
        want, got = getattr(local, metric)(inputs), getattr(served, metric)(inputs)
        assert got.shape == want.shape == (len(inputs),) and np.isfinite(want).all(), metric
        np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE, err_msg=metric)
    # provenance: the same models and checksums, only where they ran differs
    assert served.provenance()["quality"] == local.provenance()["quality"]
    assert served.provenance()["served_by"] == f"triton {client.url}"


def test_silero_vad_on_triton_gives_the_same_segments(client):
    rng = np.random.default_rng(3)
    speech = [synthesize_speech(rng, lang, 4.0).audio for lang in ("en", "fr", "de")]
    waves = [np.asarray(s, np.float32) for s in speech] + [np.zeros(7000, np.float32)]
    local, served = AudioBackend(), AudioBackend(vad=TritonVad(client))
    found = 0
    for wave in waves:
        assert served.speech_segments(wave) == local.speech_segments(wave)
        found += len(local.speech_segments(wave))
    assert found >= 3  # speech was found, so the comparison means something
    # several waves of different lengths in one batch: each as if alone
    alone = [speech_probabilities(load_vad_model(), [w])[0] for w in waves]
    for got, want in zip(TritonVad(client).probabilities(waves), alone):
        np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE)


def test_facexformer_on_triton_gives_the_in_process_angles(client, triton_store):
    """The network on Triton, the detector here: same files described, same angles (one request
    per batch, as in-process; float32 noise only)."""
    local = FaceXFormerHeadPose(triton_store)
    served = FaceXFormerHeadPose(triton_store, network=TritonFaceXFormer(client))
    assert served.describe() == local.describe() and "stand-in:0" in local.describe()
    assert served.served_by == f"triton {client.url}" and local.served_by == "in-process"
    crops = [np.asarray(im[:224, :224]) for im in images(4, size=256, seed=5)]
    want, got = local.angles(crops), served.angles(crops)
    assert got.shape == want.shape == (4, 3) and got.dtype == want.dtype == np.float32
    assert np.ptp(want, axis=0).min() > 0  # the stand-in's angles move with the crop
    np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=1e-4)


# ---------------------------------------------------------------------------- dynamic batching
def test_dynamic_batching_serves_concurrent_requests_in_fewer_executions(client, triton):
    model, frames = "musiq", images(12, size=64)
    before = client.statistics(model)
    barrier = threading.Barrier(len(frames))

    def one(frame):
        barrier.wait()
        return client.infer(model, "IMAGES", frame[None], ("SCORES",))["SCORES"][0, 0]
    threads_out = [None] * len(frames)
    workers = [threading.Thread(target=lambda i=i: threads_out.__setitem__(i, one(frames[i])))
               for i in range(len(frames))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    after = client.statistics(model)
    requests = after["inference_count"] - before["inference_count"]
    executions = after["execution_count"] - before["execution_count"]
    assert requests == len(frames)
    assert executions < requests, f"{requests} requests took {executions} executions: no batching"
    # each request still got its own image's score
    alone = TritonModels(client).scores("musiq", frames)
    np.testing.assert_allclose(np.array(threads_out, float), alone, rtol=TOLERANCE, atol=TOLERANCE)
    # Triton's Prometheus metrics say the same
    samples = scrape(triton.metrics_url)
    labels = frozenset({"model": model, "version": "1"}.items())
    assert samples[("nv_inference_exec_count_total", labels)] < samples[("nv_inference_count_total", labels)]


# ---------------------------------------------------------------------------- Triton killed mid-run
@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    kit = generate_kit(tmp_path_factory.mktemp("kit"), seed=11, n_clips=1, duration_s=2.0, size=128, variants=())
    return kit.videos()[0]


def quality_request(path, stride):
    """A QualityRequest with the landmarks the landmarks service would have sent."""
    settings = Settings(quality="paper", frame_stride=stride)
    series = run_frame_pass(MediaReader(path, settings.limits), settings, None)
    return quality_pb2.QualityRequest(
        video=VideoRef(uri=str(path)), settings=RunSettings(quality="paper", frame_stride=stride),
        landmarks=[wire.landmarks_to_proto("single", series.landmarks["single"])]), settings


def test_triton_killed_mid_run_makes_the_services_unavailable_until_it_is_back(triton, clip, tmp_path, fake_store):
    def service(name):
        return ServiceProcess(name, ["--backend", "triton", "--triton-url", triton.address, "--quality", "paper",
                                     "--weights-store", str(tmp_path), "--allow-root", str(clip.parent)],
                              stderr=open(tmp_path / f"{name}.log", "a")).start(free_port(), 0)
    quality, audio = service("quality"), service("audio")
    channel = grpc.insecure_channel(quality.address)
    stub = quality_pb2_grpc.QualityServiceStub(channel)
    try:
        quality.wait_for("SERVING", 120)
        audio.wait_for("SERVING", 120)
        # scores through the service equal the in-process backend's on the same frames
        request, settings = quality_request(clip, stride=10)
        first = stub.Score(request, timeout=300)
        local = QualityBackend(mode="paper", store=fake_store)
        frames = [f for i, f in MediaReader(clip, settings.limits).frames() if i % 10 == 0]
        np.testing.assert_allclose(wire.get_array(first, "global_aesthetic"), local.global_aesthetic(frames),
                                   rtol=TOLERANCE, atol=TOLERANCE)

        # kill Triton while a call is running in it
        slow, _ = quality_request(clip, stride=1)
        outcome = {}
        call = threading.Thread(target=lambda: outcome.update(error=_code_of(lambda: stub.Score(slow, timeout=300))))
        call.start()
        wait_in_flight(quality, "/theval.v1.QualityService/Score", 60)
        time.sleep(2.0)  # into the call: ~50 frames of topiq_iaa take far longer
        triton.kill()
        call.join(120)
        code, detail = outcome["error"]
        assert code == grpc.StatusCode.UNAVAILABLE, (code, detail)
        assert f"Triton at {triton.address}" in detail, detail
        quality.wait_for("NOT_SERVING", 30)
        audio.wait_for("NOT_SERVING", 30)
        code, detail = _code_of(lambda: stub.Score(request, timeout=30))
        assert code == grpc.StatusCode.UNAVAILABLE and "Triton" in detail, detail

        triton.start()  # same ports
        quality.wait_for("SERVING", 120)
        audio.wait_for("SERVING", 120)
        again = stub.Score(request, timeout=300)
        for name in ("global_aesthetic", "face_quality", "mouth_quality"):
            np.testing.assert_allclose(wire.get_array(again, name), wire.get_array(first, name),
                                       rtol=TOLERANCE, atol=TOLERANCE, err_msg=name)
    finally:
        channel.close()
        for p in (quality, audio):
            p.terminate(30)
        if not triton.alive():
            triton.start()


def test_the_head_pose_service_runs_facexformer_on_triton(triton, clip, triton_store, tmp_path):
    """`theval serve headpose --backend triton --headpose facexformer`: EstimateVideo's rows are
    those of the in-process pass (detector here, network on Triton); Describe names the same
    files, served by Triton. Every 10th frame: the detector costs about a second per frame."""
    service = ServiceProcess("headpose", ["--backend", "triton", "--triton-url", triton.address, "--headpose",
                                          "facexformer", "--weights-store", str(triton_store),
                                          "--allow-root", str(clip.parent)],
                             stderr=open(tmp_path / "headpose.log", "a")).start(free_port(), 0)
    channel = grpc.insecure_channel(service.address)
    stub = headpose_pb2_grpc.HeadPoseServiceStub(channel)
    try:
        service.wait_for("SERVING", 120)
        settings = RunSettings(quality="proxy", headpose="facexformer", frame_stride=10)
        response = stub.EstimateVideo(headpose_pb2.HeadPoseVideoRequest(video=VideoRef(uri=str(clip)),
                                                                         settings=settings), timeout=600)
        local = FaceXFormerHeadPose(triton_store)
        run = Settings(quality="proxy", headpose="facexformer", frame_stride=10)
        want = run_headpose_pass(MediaReader(clip, run.limits), run, local)
        got = np.stack([wire.get_array(response, n) for n in ("pitch", "yaw", "roll", "cx", "cy")], axis=1)
        assert response.frame_count == want.frame_count and got.shape == want.head_pose.shape
        assert np.isfinite(want.head_pose).all()  # a face in every used frame: the comparison means something
        np.testing.assert_allclose(got, want.head_pose, rtol=TOLERANCE, atol=1e-4)
        described = stub.Describe(DescribeRequest(settings=settings), timeout=60)
        assert described.backend == local.describe()
        assert json.loads(described.provenance_json)["served_by"] == f"triton {triton.address}"
    finally:
        channel.close()
        service.terminate(30)


def _code_of(call):
    try:
        call()
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as err:
        return err.code(), err.details()


# ---------------------------------------------------------------------------- mutual TLS
def test_triton_beyond_loopback_needs_mutual_tls_and_serves_its_callers_only(fake_store, tmp_path):
    """Triton has no tokens and its own mutual TLS admits any certificate of the CA: on a pod
    network its front (rpc.triton.front) takes only the certificates named for the services whose
    models run on it, forwards their calls to tritonserver on loopback, and serves no admin
    method; the HTTP endpoint stays on loopback. Started here on 127.0.0.1 with TLS on."""
    import os

    from scripts import containers
    from theval_mesh.pure.errors import UserError
    from theval_mesh.rpc.security import ClientSecurity, client_channel
    with pytest.raises(UserError, match="mutual TLS"):
        TritonServer(default_repository(), host="0.0.0.0")
    pki = containers.make_secrets(tmp_path / "pki", {n: [n] for n in ("triton", "quality", "audio", "evaluator")},
                                  user=f"{os.getuid()}:{os.getgid()}")

    def holder(name):
        return ClientSecurity(*(str(pki / name / f) for f in ("ca.crt", "tls.crt", "tls.key")))

    tls = tuple(str(pki / "triton" / f) for f in ("tls.crt", "tls.key", "ca.crt"))
    server = TritonServer(default_repository(), weights_store=fake_store, models=["silero_vad"],
                          log=open(tmp_path / "triton.log", "a"), tls=tls).start()
    try:
        assert "ssl" not in " ".join(server.command(tmp_path))  # tritonserver itself: loopback, behind the front
        for name in ("quality", "audio"):
            with TritonClient(server.address, holder(name)) as client:
                assert client.states()["silero_vad"][0] == "READY"
                assert TritonVad(client).provenance() == AudioBackend().provenance()
        for security, refusal in ((None, "UNAVAILABLE"), (ClientSecurity(tls[2]), "UNAVAILABLE"),  # no certificate
                                  (holder("evaluator"), "certificate names 'evaluator'"),
                                  (holder("triton"), "certificate names 'triton'")):
            with TritonClient(server.address, security) as client, pytest.raises(ServiceError) as err:
                client.states()
            assert refusal == err.value.code or refusal in str(err.value), (security, err.value)
        with client_channel(server.address, holder("quality")) as channel:  # an admin method: not served
            unload = channel.unary_unary("/inference.GRPCInferenceService/RepositoryModelUnload")
            assert _code_of(lambda: unload(b"", timeout=10))[0] == grpc.StatusCode.UNIMPLEMENTED
        assert server.live() and server.http_url.startswith("http://127.0.0.1:")  # HTTP stays on loopback
        _front_alone_serves_its_callers_only(server, tls, holder, tmp_path)
    finally:
        server.close()
    assert server.front is None


def _front_alone_serves_its_callers_only(server, tls, holder, tmp_path):
    """`theval triton front` (the GPU overlay's sidecar of NVIDIA's tritonserver) in front of the
    same tritonserver: the same caller check; a backend beyond loopback is refused."""
    import subprocess
    import sys
    import time

    from theval_mesh.rpc.launcher import free_port
    cli = [sys.executable, "-m", "theval_mesh", "triton", "front", "--tls-cert", tls[0], "--tls-key", tls[1],
           "--tls-client-ca", tls[2]]
    refused = subprocess.run(cli + ["--backend", "10.0.0.1:8011"], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "on loopback" in refused.stderr, refused.stderr
    port = free_port()
    front = subprocess.Popen(cli + ["--port", str(port), "--backend", f"127.0.0.1:{server.ports['backend_grpc']}"],
                             stdout=open(tmp_path / "front.log", "w"), stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 60
        with TritonClient(f"127.0.0.1:{port}", holder("audio")) as client:
            while True:
                try:
                    assert client.states()["silero_vad"][0] == "READY"
                    break
                except ServiceError as err:
                    assert err.code == "UNAVAILABLE" and time.monotonic() < end, err
                    time.sleep(0.2)
        with TritonClient(f"127.0.0.1:{port}", holder("evaluator")) as client, pytest.raises(ServiceError) as err:
            client.states()
        assert "certificate names 'evaluator'" in str(err.value)
    finally:
        front.terminate()
        assert front.wait(30) == 0
