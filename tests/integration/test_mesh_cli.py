"""`theval mesh up`, `theval serve` and `theval evaluate --mesh`, as an operator runs them."""
import csv
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest

from tests.support.certificates import issue, make_ca
from tests.support.processes import takes_ctrl_c
from theval_mesh.commands.cli import main
from theval_mesh.rpc.launcher import QUIET, ServiceProcess
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc, landmarks_pb2_grpc
from theval_mesh.synth import generate_kit, write_bad_inputs

THEVAL = [sys.executable, "-m", "theval_mesh.commands.cli"]
ROW = re.compile(r"^\s+(\w+)\s+(\S+:\d+)\s+metrics (http://\S+)$")


def run_cli(*args, env=None):
    return subprocess.run(THEVAL + list(args), capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, env, missing", [
    (["mesh", "up", "--allow-root", "."], {}, "--store (or THEVAL_STORE)"),
    (["serve", "evaluator", "--port", "0", "--metrics-port", "0", "--store", "s.db"], {}, "--allow-root"),
    (["serve", "landmarks", "--metrics-port", "0"], {"THEVAL_ALLOWED_ROOTS": "."}, "--port (or THEVAL_PORT)"),
    (["serve", "evaluator", "--port", "0", "--metrics-port", "0", "--store", "s.db", "--allow-root", "."], {},
     "--landmarks-addr (or THEVAL_LANDMARKS_ADDR)"),
])
def test_a_missing_setting_stops_start_up_naming_it(args, env, missing, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("THEVAL_")} | env
    done = subprocess.run(THEVAL + args, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert f"missing required setting {missing}" in done.stderr


def test_a_bad_setting_stops_start_up_naming_it(tmp_path):
    done = run_cli("serve", "headpose", "--port", "0", "--metrics-port", "0", env={"THEVAL_WORKERS": "many"})
    assert done.returncode == 1 and "THEVAL_WORKERS='many' is not a valid int" in done.stderr
    done = run_cli("serve", "audio", "--port", "70000", "--metrics-port", "0", "--allow-root", str(tmp_path))
    assert done.returncode == 1 and "--port=70000: must be a port number" in done.stderr


def test_a_port_in_use_is_an_error(tmp_path):
    first = ServiceProcess("headpose", stderr=open(tmp_path / "first.log", "w")).start()
    try:
        done = run_cli("serve", "headpose", "--port", str(first.port), "--metrics-port", "0")
        assert done.returncode == 1 and f"cannot listen on 127.0.0.1:{first.port}" in done.stderr
    finally:
        first.terminate()


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    kit = generate_kit(root / "kit", seed=11, n_clips=2, duration_s=2.0, size=128, variants=("static_head",))
    bad = write_bad_inputs(root / "bad", size=128, duration_s=2.0)
    broken = root / "broken"
    broken.mkdir()
    shutil.copy(kit.video("clip_00", "static_head"), broken / "clip_00.mp4")  # named after its GT clip: it pairs
    shutil.copy(bad["corrupt"], broken / "b.mp4")
    shutil.copy(bad["no_face"], broken / "c.mp4")
    return {"root": root, "gt": kit.dir("gt"), "static": kit.dir("static_head"), "broken": broken}


def _start_mesh_up(videos, tmp, extra=(), timeout=180):
    """`theval mesh up` in a child process: {service: (address, metrics url)}, and the process;
    killed, and the test failed with its output, when it is not up within `timeout`."""
    proc = subprocess.Popen(takes_ctrl_c(THEVAL + ["mesh", "up", "--port", "0", "--metrics-port", "0", "--store",
                                                   str(tmp / "store.sqlite"), "--allow-root", str(videos["root"]),
                                                   "--quality", "proxy", *extra]),
                            stdout=subprocess.PIPE, stderr=open(tmp / "mesh.log", "w"), text=True,
                            env={**os.environ, **QUIET})
    lines: queue.Queue = queue.Queue()  # read by a thread: a mesh that never comes up may print nothing
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    services, seen = {}, []
    deadline = time.monotonic() + timeout
    while not (seen and seen[-1].startswith("Evaluate at")):
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            proc.wait()
            pytest.fail(f"mesh up is not up after {timeout} s:\n{''.join(seen)[-2000:]}\n"
                        f"{(tmp / 'mesh.log').read_text()[-2000:]}")
        seen.append(line)
        match = ROW.match(line)
        if match:
            services[match.group(1)] = (match.group(2), match.group(3))
    expected = {"evaluator", "landmarks", "headpose", "quality", "audio"} | ({"triton"} if "--triton" in extra else set())
    assert set(services) == expected, "".join(seen)
    return services, proc


@pytest.fixture(scope="module")
def mesh_up(videos, tmp_path_factory):
    services, proc = _start_mesh_up(videos, tmp_path_factory.mktemp("mesh-up"))
    yield services, proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


@pytest.mark.slow
def test_evaluate_through_the_mesh_writes_the_same_files(videos, mesh_up, tmp_path):
    services, _ = mesh_up
    common = ["evaluate", "--gt", str(videos["gt"]), "--model", f"static={videos['static']}",
              "--model", f"broken={videos['broken']}", "--quality", "proxy", "--quiet"]
    assert main(common + ["--out", str(tmp_path / "embedded")]) == 3  # partial: broken videos
    assert main(common + ["--out", str(tmp_path / "mesh"), "--mesh", services["evaluator"][0],
                          "--workers", "3"]) == 3

    def table(name):
        with open(tmp_path / name) as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            r.pop("seconds", None)
        return rows
    for name in ("results.csv", "raw_metrics.csv", "leaderboard.csv", "leaderboard.md"):
        if name.endswith(".md"):
            assert (tmp_path / "mesh" / name).read_text() == (tmp_path / "embedded" / name).read_text()
        else:
            assert table(f"mesh/{name}") == table(f"embedded/{name}"), name
    failed = [r for r in table("mesh/results.csv") if r["status"] == "failed"]
    assert [r["video"].rsplit("/", 1)[1] for r in failed] == ["b.mp4"]
    # c.mp4 has no face: profile reference scores it as the reference code does, both ways alike
    no_face = next(r for r in table("mesh/results.csv") if r["video"].endswith("c.mp4"))
    assert no_face["status"] == "ok" and float(no_face["lip_dynamics"]) == 0.0 and "no face" in no_face["warnings"]


@pytest.mark.slow
def test_ctrl_c_stops_every_service(mesh_up):
    services, proc = mesh_up
    pids_before = _children(proc.pid)
    assert len(pids_before) == 5
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    for name, (address, _) in services.items():
        probe = ServiceProcess(name)
        probe.host, probe.port = address.rsplit(":", 1)[0], int(address.rsplit(":", 1)[1])
        assert probe.health() == "DOWN", name
    assert not [p for p in pids_before if os.path.exists(f"/proc/{p}")]


@pytest.mark.slow
def test_services_stop_when_mesh_up_is_killed(videos, tmp_path):
    """kill -9 of the launcher: every service sees its launcher's pipe close and stops gracefully
    (they used to keep running, and the next `mesh up` failed with "port in use")."""
    services, proc = _start_mesh_up(videos, tmp_path)
    children = _children(proc.pid)
    assert len(children) == 5
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 90
    while [p for p in children if _running(p)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in children if _running(p)]
    for name, (address, _) in services.items():
        probe = ServiceProcess(name)
        probe.host, probe.port = address.rsplit(":", 1)[0], int(address.rsplit(":", 1)[1])
        assert probe.health() == "DOWN", name


def _tls_material(tmp_path):
    """((CA files, certificate, key), one certificate every server serves, an operator's token,
    mesh up's flags for mutual TLS and the token)."""
    ca, ca_cert, ca_key = make_ca(tmp_path, "mesh-ca")
    server = issue(tmp_path, "server", ca_cert, ca_key)
    token = "operator-token-" + "t" * 24
    tokens = tmp_path / "tokens"
    tokens.write_text(f"operator {token}\n")
    tokens.chmod(0o600)
    return (ca, ca_cert, ca_key), server, token, ["--tls-cert", server.cert, "--tls-key", server.key, "--tls-ca",
                                                  ca.cert, "--tls-client-ca", ca.cert, "--tokens-file", str(tokens)]


@pytest.mark.slow
def test_mesh_up_with_tls_and_tokens_comes_up_and_scores(videos, tmp_path):
    """TLS on every port, the services (and, as the flags apply to every server, the evaluator)
    requiring a client certificate of the CA, a token on the API: `mesh up` asks its services'
    health over TLS (it used to ask in plaintext, fail thousands of handshakes and give up after
    600 s), and a video scores through the evaluator's mutual TLS to the services."""
    (ca, ca_cert, ca_key), server, token, tls = _tls_material(tmp_path)
    services, proc = _start_mesh_up(videos, tmp_path, tls)
    try:
        address = services["evaluator"][0]
        clip = common_pb2.VideoRef(uri=str(next(videos["gt"].glob("*.mp4"))))
        with client_channel(address, ClientSecurity(ca.cert, server.cert, server.key, token)) as channel:
            answer = evaluator_pb2_grpc.EvaluatorServiceStub(channel).Evaluate(
                evaluator_pb2.EvaluateRequest(video=clip), timeout=300)
        assert answer.result.status == "ok" and "lip_dynamics" in answer.result.metrics, answer.result
        assert "handshake failed" not in (tmp_path / "mesh.log").read_text().lower()
        # the services admit the name of the certificate they all serve (the evaluator's), no other
        mallory = issue(tmp_path, "mallory", ca_cert, ca_key)
        for holder, code in ((server, grpc.StatusCode.OK), (mallory, grpc.StatusCode.PERMISSION_DENIED)):
            with client_channel(services["landmarks"][0], ClientSecurity(ca.cert, holder.cert, holder.key)) as channel:
                try:
                    landmarks_pb2_grpc.LandmarksServiceStub(channel).Describe(common_pb2.DescribeRequest(), timeout=10)
                    got = grpc.StatusCode.OK
                except grpc.RpcError as err:
                    got = err.code()
            assert got == code, holder
        for security, code in ((ClientSecurity(ca.cert, server.cert, server.key), grpc.StatusCode.UNAUTHENTICATED),
                               (ClientSecurity(token=token), grpc.StatusCode.UNAVAILABLE)):  # plaintext
            with client_channel(address, security) as channel:
                with pytest.raises(grpc.RpcError) as refused:
                    evaluator_pb2_grpc.EvaluatorServiceStub(channel).ListReferences(
                        evaluator_pb2.ListReferencesRequest(), timeout=10)
            assert refused.value.code() == code
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0


@pytest.mark.slow
def test_mesh_up_with_tls_and_triton_serves_triton_behind_the_same_tls(videos, tmp_path, monkeypatch):
    """`mesh up --triton` with TLS: Triton gets the mesh's certificate and client authentication
    (its front), the audio service reaches it over TLS and a video scores; when the mesh stops,
    Triton's working folder is gone. (It used to start Triton in plaintext: audio failed 604
    handshakes and the mesh gave up after 600 s, leaving the folder behind.)"""
    (ca, _, _), server, token, tls = _tls_material(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where mesh up's Triton makes its working folder
    (tmp_path / "tmp").mkdir()
    services, proc = _start_mesh_up(videos, tmp_path, ["--triton", *tls], timeout=600)
    try:
        assert "triton" in services
        clip = common_pb2.VideoRef(uri=str(next(videos["gt"].glob("*.mp4"))))
        with client_channel(services["evaluator"][0], ClientSecurity(ca.cert, server.cert, server.key, token)) as channel:
            answer = evaluator_pb2_grpc.EvaluatorServiceStub(channel).Evaluate(
                evaluator_pb2.EvaluateRequest(video=clip), timeout=300)
        assert answer.result.status == "ok" and "lip_sync" in answer.result.metrics, answer.result
        assert "triton" in answer.result.provenance_json
        with client_channel(services["triton"][0]) as channel:  # plaintext to Triton's port: refused
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary("/inference.GRPCInferenceService/ServerLive")(b"", timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0
    assert not list((tmp_path / "tmp").glob("theval-triton-*"))


def _running(pid) -> bool:
    """Alive and not a zombie (an orphan's exit status may wait for its new parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children(pid) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]
