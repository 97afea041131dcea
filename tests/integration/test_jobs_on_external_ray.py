"""A job submitted to the evaluator, run on an external Ray cluster (`--ray-address`) as on
Kubernetes: a Ray head of its own (`ray start`, tests/support/ray_support.py: loopback, Ray's token
authentication) started in an environment without the mesh's settings, so that its workers know
neither the evaluator's CA nor a token, and an evaluator with TLS and bearer tokens that reaches
it by its GCS address (a driver on one of the cluster's machines) and by Ray Client (`ray://`,
a driver anywhere: the evaluator's pod on Kubernetes). Every video of the job is scored: the
job's actors get the CA and the job's own token from its driver and dial the evaluator's
advertised address. Real Ray, real gRPC servers, real certificates."""
import os
import secrets

import pytest

from tests.support.certificates import issue, make_ca
from tests.support.mesh_support import Mesh
from tests.support.ray_support import RayHead
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.rpc.launcher import free_port
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.v1 import evaluator_pb2, evaluator_pb2_grpc
from theval_mesh.synth import generate_kit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ALICE = "alice-token-" + "a" * 24
CLIPS = 4


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pki")
    ca, ca_cert, ca_key = make_ca(folder, "mesh-ca")
    tokens = folder / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    tokens.chmod(0o600)
    return {"ca": ca.cert, "server": issue(folder, "server", ca_cert, ca_key), "tokens": str(tokens)}


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    kit = generate_kit(root / "kit", seed=11, n_clips=2, duration_s=1.5, size=128, variants=())
    (root / "gt").mkdir()
    for i in range(CLIPS):
        os.link(kit.videos()[i % 2], root / "gt" / f"c{i}.mp4")
    return root


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """The cluster's environment has no THEVAL_* (and no Ray settings but its token): what a
    KubeRay node has. PYTHONPATH stays: its workers import this checkout's theval_mesh, as a
    node of the theval/worker image has it installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THEVAL_", "RAY_"))}
    client_port = free_port()
    head = RayHead(tmp_path_factory.mktemp("ray") / "ray.log", env, secrets.token_hex(32), "--num-cpus=2",
                   f"--ray-client-server-port={client_port}")
    try:
        head.wait_listening().wait_listening(client_port)
        head.client_address = f"ray://127.0.0.1:{client_port}"
        yield head
    finally:
        head.stop()


@pytest.fixture(scope="module")
def services(pki, videos, tmp_path_factory):
    """The four services, serving TLS with the mesh's certificate."""
    tls = ["--tls-cert", pki["server"].cert, "--tls-key", pki["server"].key]
    m = Mesh(tmp_path_factory.mktemp("services"), roots=[videos], service_args={d: tls for d in DEPENDENCIES},
             security={d: ClientSecurity(pki["ca"]) for d in DEPENDENCIES}).start_dependencies()
    yield m
    m.stop()


@pytest.mark.parametrize("form", ["gcs", "client"])
def test_every_video_of_a_submitted_job_is_scored_on_an_external_ray(form, pki, videos, ray_head, services,
                                                                      tmp_path):
    address = ray_head.address if form == "gcs" else ray_head.client_address
    tls = ["--tls-cert", pki["server"].cert, "--tls-key", pki["server"].key, "--tls-ca", pki["ca"]]
    evaluator = Mesh(tmp_path, roots=[videos], ports={d: services.procs[d].port for d in DEPENDENCIES},
                     evaluator_args=tls + ["--tokens-file", pki["tokens"], "--ray-address", address,
                                           "--job-workers", "2", "--single-pass"],
                     security={"evaluator": ClientSecurity(pki["ca"], token=ALICE)},
                     env=ray_head.driver_env)  # Ray's token: the job's driver's way into the cluster
    try:
        evaluator.start_evaluator()
        with client_channel(evaluator.procs["evaluator"].address, ClientSecurity(pki["ca"], token=ALICE)) as channel:
            stub = evaluator_pb2_grpc.EvaluatorServiceStub(channel)
            job = stub.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(videos / "gt")), timeout=60)
            final = list(stub.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=300))[-1]
            assert (final.state, final.done, final.failed, final.total) == ("done", CLIPS, 0, CLIPS), final
            results = list(stub.GetJobResults(evaluator_pb2.JobRequest(id=job.id), timeout=60))
        assert len(results) == CLIPS and all(r.status == "ok" for r in results), [r.reason for r in results]
    except AssertionError:
        print("".join(p.read_text(errors="replace") for p in sorted(tmp_path.rglob("*.log"))))  # the driver's too
        print(ray_head.session_logs())  # the Ray Client server's, where a `ray://` session failed to start
        raise
    finally:
        evaluator.stop()

