"""The containerized mesh, for real: the images built offline (`./dev images`), docker/compose.yaml
started with TLS and tokens (`./dev containers up`), the kit scored through it with `theval
evaluate --mesh` exactly as embedded, a killed service container recovered as a killed process is,
and everything stopped at the end (the containers, and the engine when this test started it)."""
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scripts import containers, images
from tests.support.mesh_support import free_port, results_differences
from tests.support.prometheus_support import Prometheus
from theval_mesh.backends.audio.backend import AudioBackend
from theval_mesh.commands.cli import main
from theval_mesh.outputs.results_files import write_results_csv
from theval_mesh.rpc import probe
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.triton.client import TritonClient, TritonVad
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc
from theval_mesh.synth.speech import synthesize_speech

# The first test may wait for the background image build (cold: ~20 min on 2 cores).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
C = grpc.StatusCode


@pytest.fixture(scope="module")
def built(built_images):
    print("\n" + "\n".join(f"{b['image']:28} {b['bytes'] / 1e6:6.0f} MB  built in {b['seconds']:.0f} s"
                           for b in built_images.values()))
    return built_images


@pytest.fixture(scope="module")
def mesh(built, kit, tmp_path_factory):
    """The compose mesh on free loopback ports, the kit's folder as its data (readable by the
    containers' user), proxy quality like the embedded run; its environment and start-up times."""
    os.chmod(kit.out_dir, 0o755)  # pytest's folders are 0700; the containers run as uid 10001
    ports = {f"{s.upper()}_{kind}": str(free_port()) for s in containers.SERVICES for kind in ("PORT", "METRICS_PORT")}
    start = time.monotonic()
    env = containers.up(Path(kit.out_dir), tmp_path_factory.mktemp("state"), {**ports, "THEVAL_QUALITY": "proxy"})
    env["cold_start_s"] = f"{time.monotonic() - start:.1f}"
    yield env
    containers.down()  # nothing left when test_down_stops_what_up_started_without_its_settings ran
    assert not project_containers()


def project_containers() -> list[str]:
    return subprocess.run(["docker", "ps", "-aq", "--filter", f"label={containers.LABEL}.project={containers.PROJECT}"],
                          capture_output=True, text=True, check=True).stdout.split()


def secret(env, name) -> str:
    return str(Path(env["THEVAL_SECRETS"]) / name)


def address(env, service) -> str:
    return f"127.0.0.1:{env[service.upper() + '_PORT']}"


def health(env, service) -> str:
    """What the images' health check answers, asked from the host with the service's own certificate."""
    return probe.check({"THEVAL_PORT": env[service.upper() + "_PORT"],
                        "THEVAL_TLS_CERT": secret(env, f"{service}/tls.crt"),
                        "THEVAL_TLS_KEY": secret(env, f"{service}/tls.key"), "THEVAL_TLS_CA": secret(env, "ca.crt")})


def wait_health(env, service, want, timeout=120):
    end = time.monotonic() + timeout
    while (now := health(env, service)) != want:
        assert time.monotonic() < end, f"{service} is {now}, not {want}"
        time.sleep(0.2)


def evaluator(env, token=True):
    token_value = Path(secret(env, "token")).read_text().strip() if token else None
    channel = client_channel(address(env, "evaluator"), ClientSecurity(secret(env, "ca.crt"), token=token_value))
    return evaluator_pb2_grpc.EvaluatorServiceStub(channel), channel


def docker(*args) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.strip()


def test_each_image_holds_its_service_only_and_is_labelled(built):
    version = images.version()
    for name in containers.SERVICES:
        info = json.loads(docker("image", "inspect", images.tag(name)))[0]["Config"]
        assert info["User"] == "10001:10001", name
        assert info["Healthcheck"]["Test"][-3:] == ["python", "-m", "theval_mesh.rpc.probe"], name
        labels = info["Labels"]
        assert labels["org.opencontainers.image.version"] == version
        assert labels["org.opencontainers.image.revision"] and labels["org.opencontainers.image.source"]
    has_torch = "import importlib.util as u; print(u.find_spec('torch') is not None)"
    for name, torch in (("landmarks", "False"), ("headpose", "False"), ("evaluator", "False"), ("quality", "True")):
        assert docker("run", "--rm", "--network", "none", "--entrypoint", "python", images.tag(name), "-c",
                      has_torch) == torch, name
    # no pip cache, no compiler in the final images
    assert docker("run", "--rm", "--network", "none", "--entrypoint", "sh", images.tag("landmarks"), "-c",
                  "ls /root/.cache /tmp/.cache 2>/dev/null; command -v gcc cc || true") == ""


def test_a_build_removes_the_images_it_superseded_and_nothing_else(built, tmp_path, monkeypatch):
    """Each rebuild after a dependency change leaves gigabytes of old images: `./dev images` removes
    those its own ledger lists, never another project's dangling images (both built as it builds)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a ledger of this test's own

    def build(repository, label):  # distinct content per repository: equal images share an id
        key = repository.replace("/", ".")
        (tmp_path / "Dockerfile").write_text(f"FROM {built['headpose']['image']}\nLABEL {key}={label}\n")
        subprocess.run(images.buildkit_client() + ["-q", "--network", "none", "-t", f"{repository}:probe",
                                                   str(tmp_path)],
                       check=True, capture_output=True, env={**os.environ, "DOCKER_BUILDKIT": "1"})
        return images.image_id(f"{repository}:probe")

    old, foreign_old = build("theval-test/ours", 1), build("theval-test/foreign", 1)
    new, _ = build("theval-test/ours", 2), build("theval-test/foreign", 2)  # the old ones dangle
    try:
        assert {old, foreign_old} <= images.dangling()
        images.remember({"ours": {old}})
        assert images.remove_superseded({"ours": {new}}) == 1
        assert old not in images.dangling() and foreign_old in images.dangling()
        assert json.loads(images.ledger_file().read_text()) == {"ours": [new]}
    finally:
        subprocess.run(["docker", "rmi", "theval-test/ours:probe", "theval-test/foreign:probe", foreign_old, old],
                       capture_output=True)


def test_every_container_runs_read_only_as_its_user(mesh):
    for service in containers.SERVICES:
        c = containers.container_of(service)
        assert containers.inspect(c, "{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}") == "true 10001:10001"
        denied = subprocess.run(["docker", "exec", c, "touch", "/opt/theval/x"], capture_output=True, text=True)
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr, service
        docker("exec", c, "touch", "/tmp/scratch")  # the tmpfs
        assert health(mesh, service) == "SERVING"
        # its own key and certificate, the CA's certificate (never its key), the tokens where read
        mounted = docker("exec", c, "ls", "-A", "/run/secrets/theval").split()
        assert sorted(mounted) == sorted(["ca.crt", "tls.crt", "tls.key"] + (["tokens"] if service == "evaluator"
                                                                              else [])), service
        sources = [m["Source"] for m in json.loads(containers.inspect(c, "{{json .Mounts}}"))
                   if m["Source"].startswith(mesh["THEVAL_SECRETS"])]
        assert sources == [secret(mesh, service)], sources


def test_a_call_without_the_token_is_refused_and_one_with_it_scores(mesh, kit):
    request = evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=str(kit.videos("gt")[0])))
    stub, channel = evaluator(mesh, token=False)
    with channel, pytest.raises(grpc.RpcError) as refused:
        stub.Evaluate(request, timeout=60)
    assert refused.value.code() == C.UNAUTHENTICATED
    stub, channel = evaluator(mesh)
    with channel:
        assert stub.Evaluate(request, timeout=120).result.status == "ok"
    # a service refuses a caller without the evaluator's client certificate (mutual TLS), and its
    # certificate answers for its own name only (the evaluator reaches it by that name)
    as_evaluator = ClientSecurity(secret(mesh, "ca.crt"), secret(mesh, "evaluator/tls.crt"),
                                  secret(mesh, "evaluator/tls.key"))
    for security, name, code in ((ClientSecurity(secret(mesh, "ca.crt")), "landmarks", C.UNAVAILABLE),
                                 (as_evaluator, "headpose", C.UNAVAILABLE), (as_evaluator, "landmarks", C.OK)):
        with client_channel(address(mesh, "landmarks"), security, [("grpc.ssl_target_name_override", name)]) as c:
            try:
                health_pb2_grpc.HealthStub(c).Check(health_pb2.HealthCheckRequest(), timeout=5)
                got = C.OK
            except grpc.RpcError as err:
                got = err.code()
        assert got == code, (security, name)


def test_the_kit_through_the_containers_equals_the_embedded_run(mesh, kit, evaluated, tmp_path, monkeypatch):
    monkeypatch.setenv("THEVAL_TLS_CA", secret(mesh, "ca.crt"))
    monkeypatch.setenv("THEVAL_TOKEN_FILE", secret(mesh, "token"))
    models = [a for v in kit.variants for a in ("--model", f"{v}={Path(kit.out_dir) / v}")]
    code = main(["evaluate", "--gt", str(Path(kit.out_dir) / "gt"), *models, "--quality", "proxy", "--quiet",
                 "--workers", "2", "--out", str(tmp_path / "containers"), "--mesh", address(mesh, "evaluator")])
    assert code == 0
    write_results_csv(evaluated[1], evaluated[0], tmp_path / "embedded.csv")
    assert len(evaluated[1]) == len(kit.clips) * (1 + len(kit.variants))
    assert not results_differences(tmp_path / "containers" / "results.csv", tmp_path / "embedded.csv")


def _host_pid(service) -> int:
    """The service's own process, as the host sees it (the container's init is its parent)."""
    c = containers.container_of(service)
    init = int(containers.inspect(c, "{{.State.Pid}}"))
    children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
    return int(children[0])


def test_a_killed_service_container_is_restarted_and_the_evaluator_recovers(mesh, kit):
    """As with processes (test_mesh_failures): the evaluator turns NOT_SERVING and names the
    service; Docker's restart policy brings the container back; scoring works again."""
    os.kill(_host_pid("landmarks"), signal.SIGKILL)
    wait_health(mesh, "evaluator", "NOT_SERVING", timeout=30)
    stub, channel = evaluator(mesh)
    with channel:
        request = evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=str(kit.videos("gt")[0])))
        try:
            stub.Evaluate(request, timeout=30)  # long enough for the other services to answer
            code, detail = C.OK, ""
        except grpc.RpcError as err:
            code, detail = err.code(), err.details()
        if code != C.OK:  # Docker may have restarted it already, or be starting it (the call waits)
            assert code in (C.UNAVAILABLE, C.DEADLINE_EXCEEDED) and "landmarks" in detail, (code, detail)
        wait_health(mesh, "evaluator", "SERVING", timeout=120)
        assert stub.Evaluate(request, timeout=120).result.status == "ok"
    assert int(containers.inspect(containers.container_of("landmarks"), "{{.RestartCount}}")) >= 1


def test_a_service_container_killed_during_a_stream(mesh, kit):
    """Every video gets an answer: OK, or UNAVAILABLE naming the service while it restarts (how many
    depends on how long Docker takes to bring it back, so no count is asserted); the stream ends;
    the mesh is SERVING again and scores the videos that failed."""
    n, videos = 8, kit.videos("gt")
    requests = [evaluator_pb2.EvaluateRequest(id=str(i), video=common_pb2.VideoRef(uri=str(videos[i % len(videos)])))
                for i in range(n)]
    stub, channel = evaluator(mesh)
    answers, killed = [], threading.Event()
    with channel:
        for answer in stub.EvaluateStream(iter(requests), timeout=300):
            answers.append(answer)
            if not killed.is_set():
                os.kill(_host_pid("quality"), signal.SIGKILL)  # while the next videos are in flight
                killed.set()
    assert sorted(a.id for a in answers) == sorted(r.id for r in requests)
    codes = [a.code for a in answers]
    assert set(codes) <= {C.OK.value[0], C.UNAVAILABLE.value[0]}, [(a.code, a.detail) for a in answers]
    assert answers[0].code == C.OK.value[0], (answers[0].code, answers[0].detail)  # scored before the kill
    assert all("quality" in a.detail for a in answers if a.code)
    wait_health(mesh, "evaluator", "SERVING", timeout=120)
    failed = [r for r in requests if r.id in {a.id for a in answers if a.code}]
    stub, channel = evaluator(mesh)
    with channel:
        again = list(stub.EvaluateStream(iter(failed), timeout=300))
    assert [a.code for a in again] == [C.OK.value[0]] * len(failed), [(a.code, a.detail) for a in again]


def test_the_triton_image_serves_the_model_repository(built, tmp_path):
    """The Triton image on free loopback ports, read-only, without quality weights: silero_vad
    READY and giving the in-process segments; Docker's health check turns healthy."""
    ports = {name: free_port() for name in ("grpc", "http", "metrics")}
    name = f"theval-triton-test-{os.getpid()}"
    docker("run", "-d", "--name", name, "--network", "host", "--read-only", "--tmpfs", "/tmp", "--init",
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true",
           "-e", f"THEVAL_TRITON_HTTP_PORT={ports['http']}", "-e", f"THEVAL_TRITON_GRPC_PORT={ports['grpc']}",
           "-e", f"THEVAL_TRITON_METRICS_PORT={ports['metrics']}", images.tag("triton"), "--model", "silero_vad")
    try:
        end = time.monotonic() + 300
        while containers.inspect(name, "{{.State.Health.Status}}") != "healthy":
            assert containers.inspect(name, "{{.State.Running}}") == "true", docker("logs", name)
            assert time.monotonic() < end, "the triton container did not turn healthy"
            time.sleep(1)
        client = TritonClient(f"127.0.0.1:{ports['grpc']}")
        try:
            assert client.states()["silero_vad"][0] == "READY"
            wave = np.asarray(synthesize_speech(np.random.default_rng(3), "en", 3.0).audio, np.float32)
            assert AudioBackend(vad=TritonVad(client)).speech_segments(wave) == AudioBackend().speech_segments(wave)
        finally:
            client.close()
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def test_prometheus_scrapes_every_container(mesh, kit, tmp_path):
    """A real Prometheus with the generated scrape config and the project's rules: every container
    up, and after an evaluation the mesh's metrics are queryable through its HTTP API."""
    targets = {s: f"127.0.0.1:{mesh[s.upper() + '_METRICS_PORT']}" for s in containers.SERVICES}
    prometheus = Prometheus(tmp_path / "prometheus", targets)
    try:
        prometheus.wait_all_up(len(targets))
        stub, channel = evaluator(mesh)
        with channel:
            for path in kit.videos("gt")[:2]:
                request = evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=str(path)))
                assert stub.Evaluate(request, timeout=120).result.status == "ok"
        stub, channel = evaluator(mesh, token=False)  # a refused call of its own: the test runs alone too
        with channel, pytest.raises(grpc.RpcError):
            stub.Evaluate(request, timeout=60)
        ok = 'theval_videos_scored_total{job="theval", service="evaluator", outcome="ok"}'
        prometheus.wait(lambda: prometheus.query(f"{ok} >= 2"), "videos scored not seen", timeout=30)
        assert {r["metric"]["service"] for r in prometheus.query('up{job="theval"} == 1')} == set(targets)
        stages = {r["metric"]["stage"] for r in prometheus.query("theval_compute_seconds_count > 0")}
        assert {"landmarks", "quality", "audio"} <= stages, stages
        assert prometheus.query('theval_evaluator_queue_depth{service="evaluator"}')
        calls = prometheus.query("sum by (service) (theval_grpc_requests_total)")
        assert {r["metric"]["service"] for r in calls} == set(targets)
        refused = prometheus.query('theval_grpc_requests_total{service="evaluator", code="UNAUTHENTICATED"}')
        assert refused, "the refused call without a token is counted as an error"
        frames = prometheus.query("sum by (service) (theval_frames_processed_total) > 0")
        assert {r["metric"]["service"] for r in frames} >= {"landmarks", "quality"}
        groups = {g["name"] for g in prometheus.api("rules")["groups"]}
        assert groups == {"theval-recording", "theval-alerts"}
        prometheus.wait(lambda: prometheus.query("theval:grpc_error_ratio:rate5m"), "no error ratio recorded")
    finally:
        prometheus.stop()


def autoscaling_query(service: str) -> tuple[str, float]:
    """prometheus-adapter's query for the custom metric of one service's HPA
    (k8s/prometheus-adapter/values.yaml, k8s/base/autoscaling.yaml), and the HPA's per-pod target.
    The adapter's label matchers are the pod's; here a service's metrics come from its one process."""
    root = Path(__file__).resolve().parents[2]
    hpa = next(h for h in yaml.safe_load_all((root / "k8s" / "base" / "autoscaling.yaml").read_text())
               if h["metadata"]["name"] == service)
    metric = next(m["pods"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods")
    rule, = [r for r in yaml.safe_load((root / "k8s" / "prometheus-adapter" / "values.yaml").read_text())["rules"]
             ["custom"] if r["name"]["as"] == metric["metric"]["name"]]
    query = rule["metricsQuery"].replace("<<.LabelMatchers>>", f'service="{service}"').replace("<<.GroupBy>>", "service")
    return query, float(metric["target"]["averageValue"])


def test_the_autoscaling_query_would_scale_up_under_load_and_down_when_idle(mesh, kit, tmp_path):
    """The HPA's desired replicas are ceil(replicas * value / target): under four concurrent
    clients the landmarks query and the evaluator's ask for more than one pod; idle, fewer than two.
    The clients call Evaluate, one video at a time each: one caller's streams are capped at 2
    (--stream-limit-per-caller), and the test has one token."""
    hpas = ("landmarks", "evaluator")
    queries = {s: autoscaling_query(s) for s in hpas}
    prometheus = Prometheus(tmp_path / "prometheus", {s: f"127.0.0.1:{mesh[f'{s.upper()}_METRICS_PORT']}"
                                                      for s in hpas})
    values, stop = {s: [] for s in hpas}, threading.Event()

    def value(service) -> float:
        result = prometheus.query(queries[service][0])
        return float(result[0]["value"][1]) if result else 0.0

    def pods(service, replicas=1) -> int:
        return math.ceil(replicas * (values[service][-1] if values[service] else 0.0) / queries[service][1])

    def load():
        videos = [v for variant in ("gt",) + kit.variants for v in kit.videos(variant)]
        stub, channel = evaluator(mesh)
        with channel:
            while not stop.is_set():
                for v in videos:
                    assert stub.Evaluate(evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=str(v))),
                                         timeout=600).result.status == "ok"
                    if stop.is_set():
                        break
    try:
        prometheus.wait_all_up(len(hpas))
        streams = [threading.Thread(target=load) for _ in range(4)]
        for s in streams:
            s.start()
        end = time.monotonic() + 75  # the queries average over a minute: enough once both ask for 2 pods
        while time.monotonic() < end and not all(pods(s) > 1 for s in hpas):
            for s in hpas:
                values[s].append(value(s))
            time.sleep(2)
        stop.set()
        for s in streams:
            s.join()
        for s in hpas:
            busy = max(values[s])
            assert math.ceil(busy / queries[s][1]) > 1, (queries[s], values[s])
            prometheus.wait(lambda s=s: math.ceil(2 * value(s) / queries[s][1]) < 2, f"{queries[s][0]} stays high when "
                            "idle", timeout=120)
            print(f"\nautoscaling query, {s}: {busy:.2f} in flight per pod under 4 clients "
                  f"(1 pod -> {math.ceil(busy / queries[s][1])}); idle {value(s):.2f} "
                  f"(2 pods -> {max(1, math.ceil(2 * value(s) / queries[s][1]))})")
    finally:
        stop.set()
        prometheus.stop()


def test_down_stops_what_up_started_without_its_settings(mesh, tmp_path):
    """Last: `./dev containers down` in a fresh shell, none of up's settings, its state folder
    gone, stops and removes every container (they used to keep running, and come back with the
    engine: down failed on placeholder settings)."""
    assert len(project_containers()) == len(containers.SERVICES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("THEVAL_") and not k.endswith("_PORT")}
    done = subprocess.run([sys.executable, containers.__file__, "down"], capture_output=True, text=True, timeout=300,
                          env={**env, "XDG_STATE_HOME": str(tmp_path / "no-state")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped and removed: " + ", ".join(sorted(containers.SERVICES)) in done.stdout
    assert not project_containers()
