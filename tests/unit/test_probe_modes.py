"""`python -m theval_mesh.rpc.probe` in each mode against real servers on loopback: a gRPC
server whose health says NOT_SERVING (alive, not ready), and a TCP port with nothing behind it."""
import socket
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from theval_mesh.rpc import probe


@pytest.fixture
def not_serving(monkeypatch):
    server = grpc.server(futures.ThreadPoolExecutor(2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("THEVAL_PORT", str(port))
    yield port
    server.stop(0)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_each_mode_answers_as_a_kubelet_reads_it(not_serving, monkeypatch):
    assert probe.main(["--live"]) == 0  # it answers: alive
    assert probe.main([]) == 1  # NOT_SERVING: not ready
    monkeypatch.setenv("THEVAL_TRITON_GRPC_PORT", str(_closed_port()))
    monkeypatch.setenv("THEVAL_TRITON_HTTP_PORT", str(_closed_port()))
    assert probe.main(["--front"]) == 1  # nothing listens
    assert probe.main(["--triton"]) == 1
    assert probe.main(["--bogus"]) == 2


def test_the_front_mode_asks_the_front_and_the_triton_behind_it(not_serving, monkeypatch):
    monkeypatch.setenv("THEVAL_TRITON_GRPC_PORT", str(not_serving))  # something listens there
    monkeypatch.setenv("THEVAL_TRITON_HTTP_PORT", str(_closed_port()))  # but no Triton is ready
    assert "127.0.0.1" in probe.check_front() and probe.check_front() != "SERVING"
