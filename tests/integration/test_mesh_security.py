"""A mesh that listens beyond loopback: TLS on every gRPC port, mutual TLS between the evaluator
and its services, bearer tokens and owners on the evaluator's API (each caller's own reference
sets, an admin who reads them all), job limits, a request refused unread without a token, a
caller's share of the streams. Real servers, real certificates (made with `cryptography`), real
Ray jobs."""
import os
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.certificates import issue, make_ca
from tests.support.mesh_support import Mesh, peak_rss_mib, reset_peak_rss, sample, scrape
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.v1 import (
    audio_pb2,
    audio_pb2_grpc,
    common_pb2,
    evaluator_pb2,
    evaluator_pb2_grpc,
    headpose_pb2_grpc,
    landmarks_pb2_grpc,
    quality_pb2_grpc,
)
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow
C = grpc.StatusCode
ALICE, BOB, OPS = "alice-token-" + "a" * 24, "bob-token-" + "b" * 24, "ops-token-" + "o" * 24
STREAM = "/theval.v1.EvaluatorService/EvaluateStream"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pki")
    ca, ca_cert, ca_key = make_ca(folder, "mesh-ca")
    _, stranger_cert, stranger_key = make_ca(folder, "stranger-ca")
    tokens = folder / "tokens"
    tokens.write_text(f"# identity token\nalice {ALICE}\nbob {BOB}\nops {OPS}\n")
    tokens.chmod(0o600)
    # Certificates are named for their holders (the common name): the services admit `evaluator` only.
    return {"ca": ca.cert, "server": issue(folder, "server", ca_cert, ca_key),
            "evaluator": issue(folder, "evaluator", ca_cert, ca_key),
            **{name: issue(folder, name, ca_cert, ca_key) for name in ("mallory", "landmarks", "audio")},
            "stranger": issue(folder, "stranger", stranger_cert, stranger_key), "tokens": str(tokens)}


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    kit = generate_kit(root / "kit", seed=5, n_clips=2, duration_s=1.5, size=128, variants=())
    (root / "gt").mkdir()
    for i, v in enumerate(kit.videos()):
        os.link(v, root / "gt" / f"c{i}.mp4")
    return root


@pytest.fixture(scope="module")
def mesh(pki, videos, tmp_path_factory):
    """Every port on all interfaces: the services require a client certificate of the CA named
    `evaluator`, the evaluator (serving that certificate) requires TLS and a token, makes `ops` an admin, and runs at most one job of at
    most 2 workers. 8 workers (the default): 4 streams, 2 per caller."""
    leaf = ["--host", "0.0.0.0", "--tls-cert", pki["server"].cert, "--tls-key", pki["server"].key,
            "--tls-client-ca", pki["ca"]]
    leaf_security = ClientSecurity(pki["ca"], pki["evaluator"].cert, pki["evaluator"].key)
    security = {d: leaf_security for d in DEPENDENCIES}
    security["evaluator"] = ClientSecurity(pki["ca"], token=ALICE)
    m = Mesh(tmp_path_factory.mktemp("mesh"), roots=[videos], service_args={d: leaf for d in DEPENDENCIES},
             evaluator_args=["--host", "0.0.0.0", "--tls-cert", pki["evaluator"].cert, "--tls-key",
                             pki["evaluator"].key, "--tls-ca", pki["ca"], "--tokens-file", pki["tokens"], "--admins", "ops",
                                   "--max-jobs", "1", "--max-job-workers", "2", "--job-workers", "1"],
             security=security)
    m.start()
    yield m
    m.stop()


def evaluator_as(mesh, pki, token=None):
    channel = client_channel(mesh.procs["evaluator"].address, ClientSecurity(pki["ca"], token=token),
                             options=[("grpc.max_send_message_length", 1 << 30)])
    return evaluator_pb2_grpc.EvaluatorServiceStub(channel), channel


def code_of(call) -> tuple:
    try:
        call()
    except grpc.RpcError as err:
        return err.code(), err.details() or ""
    return C.OK, ""


def test_every_port_is_tls_and_the_services_want_the_evaluators_certificate(mesh, pki):
    landmarks = mesh.procs["landmarks"].address
    describe = common_pb2.DescribeRequest()
    for security, expected in ((None, C.UNAVAILABLE),  # plaintext to a TLS port
                               (ClientSecurity(pki["ca"]), C.UNAVAILABLE),  # no client certificate
                               (ClientSecurity(pki["ca"], pki["stranger"].cert, pki["stranger"].key), C.UNAVAILABLE),
                               (ClientSecurity(pki["ca"], pki["evaluator"].cert, pki["evaluator"].key), C.OK)):
        with client_channel(landmarks, security) as channel:
            got, _ = code_of(lambda: landmarks_pb2_grpc.LandmarksServiceStub(channel).Describe(describe, timeout=10))
        assert got == expected, security
    with grpc.insecure_channel(mesh.procs["evaluator"].address) as channel:
        got, _ = code_of(lambda: evaluator_pb2_grpc.EvaluatorServiceStub(channel).ListReferences(
            evaluator_pb2.ListReferencesRequest(), timeout=10))
    assert got == C.UNAVAILABLE


def test_only_the_evaluators_certificate_gets_an_answer_from_a_service(mesh, pki, videos):
    """The CA signs every service's certificate: a stranger's name, or another service's, that the
    CA signed gets PERMISSION_DENIED from every service, before its request is read; health
    checks still answer."""
    clip = str(next((videos / "gt").glob("*.mp4")))
    calls = {  # one call that reads a video (or its landmarks) on each service
        "landmarks": lambda ch: landmarks_pb2_grpc.LandmarksServiceStub(ch).Describe(common_pb2.DescribeRequest(), timeout=10),
        "audio": lambda ch: audio_pb2_grpc.AudioServiceStub(ch).Analyse(
            audio_pb2.AudioRequest(video=common_pb2.VideoRef(uri=clip)), timeout=30),
        "quality": lambda ch: quality_pb2_grpc.QualityServiceStub(ch).Describe(common_pb2.DescribeRequest(), timeout=10),
        "headpose": lambda ch: headpose_pb2_grpc.HeadPoseServiceStub(ch).Describe(common_pb2.DescribeRequest(), timeout=10),
    }
    assert set(calls) == set(DEPENDENCIES)
    for service, call in calls.items():
        address = mesh.procs[service].address
        for name in ("mallory", "landmarks", "audio"):
            with client_channel(address, ClientSecurity(pki["ca"], pki[name].cert, pki[name].key)) as channel:
                got, details = code_of(lambda call=call, channel=channel: call(channel))
                assert got == C.PERMISSION_DENIED and repr(name) in details, (service, name, got, details)
                health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
                assert health.status == health_pb2.HealthCheckResponse.SERVING
        with client_channel(address, ClientSecurity(pki["ca"], pki["evaluator"].cert, pki["evaluator"].key)) as channel:
            assert code_of(lambda call=call, channel=channel: call(channel))[0] == C.OK, service
    # refused unread: 60 MiB of video bytes from mallory leave the audio service's memory as it was
    big = audio_pb2.AudioRequest(video=common_pb2.VideoRef(content=b"\0" * (60 << 20)))
    security = ClientSecurity(pki["ca"], pki["mallory"].cert, pki["mallory"].key)
    with client_channel(mesh.procs["audio"].address, security, [("grpc.max_send_message_length", 1 << 30)]) as channel:
        code, _, grown = measured(mesh.procs["audio"].proc.pid,
                                  lambda: audio_pb2_grpc.AudioServiceStub(channel).Analyse(big, timeout=60))
    assert code == C.PERMISSION_DENIED and grown < 10, (code, grown)


def test_the_api_needs_a_known_token_and_health_does_not(mesh, pki):
    for token in (None, "x" * 40, ALICE[:-1] + "b"):
        stub, channel = evaluator_as(mesh, pki, token)
        with channel:
            got, detail = code_of(
                lambda stub=stub: stub.ListReferences(evaluator_pb2.ListReferencesRequest(), timeout=10))
        assert got == C.UNAUTHENTICATED and "bearer token" in detail
    with client_channel(mesh.procs["evaluator"].address, ClientSecurity(pki["ca"])) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
    assert status == health_pb2.HealthCheckResponse.SERVING


def listed(stub, every_owner=False) -> list:
    answer = stub.ListReferences(evaluator_pb2.ListReferencesRequest(every_owner=every_owner), timeout=30)
    return [(r.owner, r.name) for r in answer.references]


def models(stub, reference, **owner) -> list:
    board = stub.GetLeaderboard(evaluator_pb2.GetLeaderboardRequest(reference=reference, **owner), timeout=60)
    return [r.model for r in board.rows]


def test_each_caller_has_its_own_reference_sets_and_an_admin_reads_them_all(mesh, pki, videos):
    """The attacker's probe: bob scores hallo2 against alice's set, reads its leaderboard and the
    names of every set. Now he finds nothing of hers, as if it did not exist, and she keeps her
    names; both may have a set named GT; the admin (ops) lists and reads every owner's sets."""
    alice, bob, ops = (evaluator_as(mesh, pki, t)[0] for t in (ALICE, BOB, OPS))
    gt = [common_pb2.VideoRef(uri=str(videos / "gt"))]
    clip = common_pb2.VideoRef(uri=str(videos / "gt" / "c0.mp4"))
    alice.CreateReference(evaluator_pb2.CreateReferenceRequest(name="GT", videos=gt), timeout=300)
    assert listed(bob) == [] and listed(alice) == [("alice", "GT")]

    def probes(reference):
        return [code_of(lambda: bob.Evaluate(evaluator_pb2.EvaluateRequest(video=clip, reference=reference,
                                                                           model="hallo2"), timeout=300)),
                code_of(lambda: models(bob, reference))]
    found, missing = probes("GT"), probes("NO-SUCH")
    assert [code for code, _ in found] == [C.NOT_FOUND] * 2, found
    assert [detail for _, detail in found] == [d.replace("NO-SUCH", "GT") for _, d in missing]  # the same answer
    assert all("alice" not in d and "stored" not in d for _, d in found), found
    got, detail = code_of(lambda: models(bob, "GT", owner="alice"))
    assert got == C.PERMISSION_DENIED and "only an admin" in detail and "--admins" in detail
    assert code_of(lambda: listed(bob, every_owner=True))[0] == C.PERMISSION_DENIED
    # alice's model name is hers on her set; bob's own GT is another set, his
    alice.Evaluate(evaluator_pb2.EvaluateRequest(video=clip, reference="GT", model="hallo2"), timeout=300)
    mine = bob.CreateReference(evaluator_pb2.CreateReferenceRequest(name="GT", videos=[clip]), timeout=300)
    assert (mine.owner, mine.videos) == ("bob", 1)
    bob.Evaluate(evaluator_pb2.EvaluateRequest(video=clip, reference="GT", model="hallo2"), timeout=300)
    assert models(alice, "GT") == models(bob, "GT") == ["GT", "hallo2"]
    assert code_of(lambda: bob.CreateReference(evaluator_pb2.CreateReferenceRequest(name="GT", videos=[clip]),
                                               timeout=60))[0] == C.ALREADY_EXISTS
    # the admin: its own sets by default, every owner's when it asks, another's leaderboard by owner
    assert listed(ops) == [] and listed(ops, every_owner=True) == [("alice", "GT"), ("bob", "GT")]
    assert models(ops, "GT", owner="alice") == ["GT", "hallo2"]
    assert code_of(lambda: models(ops, "GT"))[0] == C.NOT_FOUND  # ops has no GT of its own
    assert code_of(lambda: models(ops, "GT", owner="carol"))[0] == C.NOT_FOUND


def test_names_and_limits(mesh, pki, videos):
    alice, _ = evaluator_as(mesh, pki, ALICE)
    bob, _ = evaluator_as(mesh, pki, BOB)
    gt = [common_pb2.VideoRef(uri=str(videos / "gt"))]
    # Names: length and characters checked, a huge one not echoed back.
    for name in ("x" * (5 << 20), "line\nbreak", " padded", ""):
        got, detail = code_of(lambda name=name: alice.CreateReference(
            evaluator_pb2.CreateReferenceRequest(name=name, videos=gt), timeout=60))
        assert got == C.INVALID_ARGUMENT and len(detail) < 300, (name[:20], detail[:300])
    # Jobs: workers and jobs at once are capped; another caller's job does not exist for it.
    got, detail = code_of(lambda: alice.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(videos / "gt"), workers=16),
                                                  timeout=60))
    assert got == C.RESOURCE_EXHAUSTED and "limit of 2" in detail
    job = alice.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(videos / "gt")), timeout=60)
    got, detail = code_of(lambda: alice.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(videos / "gt")), timeout=60))
    assert got == C.RESOURCE_EXHAUSTED and "--max-jobs" in detail
    for call in (bob.GetJob, bob.CancelJob, lambda r, timeout: list(bob.StreamJob(r, timeout=timeout)),
                 lambda r, timeout: list(bob.GetJobResults(r, timeout=timeout))):
        got, detail = code_of(lambda call=call: call(evaluator_pb2.JobRequest(id=job.id), timeout=30))
        assert got == C.NOT_FOUND and job.id in detail and "sqlite" not in detail and "latest" not in detail
    # The job's driver reaches this evaluator over TLS with a token of its own, and scores.
    final = list(alice.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=600))[-1]
    assert (final.state, final.done, final.failed) == ("done", 2, 0), final
    assert len(list(alice.GetJobResults(evaluator_pb2.JobRequest(id=job.id), timeout=60))) == 2
    samples = scrape(mesh.procs["evaluator"].metrics_url)
    assert not [k for k in samples if ("job", job.id) in k[1]], "job ids on the shared /metrics"


def measured(pid: int, call) -> tuple:
    """(status code, seconds, MiB the process's peak resident memory grew by) of call(): the peak
    is reset first."""
    reset_peak_rss(pid)
    before, start = peak_rss_mib(pid), time.monotonic()
    code, _ = code_of(call)
    return code, time.monotonic() - start, peak_rss_mib(pid) - before


def test_a_call_without_a_known_token_is_refused_before_its_body_is_read(mesh, pki, figure):
    """A 60 MiB Evaluate (video bytes: the evaluator accepts up to 65 MiB) without a known token
    is refused from its metadata: the evaluator's memory does not grow by the body. The same
    request with a token is received whole: the measurement sees a body that is read."""
    pid = mesh.procs["evaluator"].proc.pid
    request = evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(content=b"\0" * (60 << 20)))
    outcomes = {}
    for who, token in (("no token", None), ("an unknown token", "x" * 40), ("alice", ALICE)):
        stub, channel = evaluator_as(mesh, pki, token)
        with channel:
            outcomes[who] = measured(pid, lambda stub=stub: stub.Evaluate(request, timeout=120))
    for who in ("no token", "an unknown token"):
        code, _, grown = outcomes[who]
        assert code == C.UNAUTHENTICATED and grown < 10, (who, outcomes[who])
    code, _, grown = outcomes["alice"]
    assert code == C.INVALID_ARGUMENT and grown > 55, outcomes["alice"]  # read, then found no video in it
    figure("60 MiB Evaluate: " + "; ".join(f"{who}: {code.name} in {t:.2f} s, peak RSS +{grown:.1f} MiB"
                                            for who, (code, t, grown) in outcomes.items()))


class HeldStream:
    """An EvaluateStream that sends nothing until released: `outcome` once it ends."""

    def __init__(self, stub):
        self.release, self.outcome = threading.Event(), None
        self.call = stub.EvaluateStream(self._requests(), timeout=120)
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _requests(self):
        self.release.wait()
        yield evaluator_pb2.EvaluateRequest(id="after", video=common_pb2.VideoRef(content=b"not a video"))

    def _wait(self):
        try:
            answers = list(self.call)
            self.outcome = (C.OK, [a.code for a in answers])
        except grpc.RpcError as err:
            self.outcome = (err.code(), err.details())


def streams_open(mesh) -> float:
    return sample(scrape(mesh.procs["evaluator"].metrics_url), "theval_grpc_in_flight_requests",
                  service="evaluator", method=STREAM)


def test_one_caller_cannot_hold_every_stream(mesh, pki):
    """4 streams, 2 per caller: alice's third is refused at once, naming the setting; bob still
    gets his 2 (all 4 open), and his third is refused as hers was."""
    alice, bob = (evaluator_as(mesh, pki, t)[0] for t in (ALICE, BOB))
    held = [HeldStream(alice), HeldStream(alice)]
    end = time.monotonic() + 30
    while streams_open(mesh) < 2:
        assert time.monotonic() < end, "alice's two streams not open"
        time.sleep(0.05)
    third = HeldStream(alice)
    third.thread.join(10)
    assert third.outcome is not None, "alice's third stream was admitted"
    code, detail = third.outcome
    assert code == C.RESOURCE_EXHAUSTED and "THEVAL_STREAM_LIMIT_PER_CALLER" in detail and "\n" not in detail
    held += [HeldStream(bob), HeldStream(bob)]
    while streams_open(mesh) < 4:
        assert time.monotonic() < end, "bob's streams not open beside alice's"
        time.sleep(0.05)
    bobs_third = HeldStream(bob)
    bobs_third.thread.join(10)
    assert bobs_third.outcome == (code, detail)
    assert all(s.outcome is None for s in held)  # none of the 4 was ended
    for s in held + [third, bobs_third]:
        s.release.set()
    for s in held:
        s.thread.join(60)
    assert [s.outcome for s in held] == [(C.OK, [C.INVALID_ARGUMENT.value[0]])] * 4  # each served its request
    again = HeldStream(alice)  # her streams ended: her share is free again
    again.release.set()
    again.thread.join(60)
    assert again.outcome == (C.OK, [C.INVALID_ARGUMENT.value[0]])


def test_no_token_reaches_a_log(mesh, pki):
    logs = "".join(p.read_text(errors="replace") for p in mesh.tmp.glob("*.log"))
    assert logs and ALICE not in logs and BOB not in logs
