"""The evaluator's view of its services' health (rpc.health.DependencyHealth) against a real gRPC
health server on loopback: a service that says NOT_SERVING or stops listening is down at once, one
that is only slow to answer is down after SLOW_CHECKS_DOWN checks in a row (no readiness flap
under load)."""
import time
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from theval_mesh.rpc.health import DependencyHealth


class Health(health_pb2_grpc.HealthServicer):
    def __init__(self):
        self.status, self.delay_s = health_pb2.HealthCheckResponse.SERVING, 0.0

    def Check(self, request, context):
        time.sleep(self.delay_s)
        return health_pb2.HealthCheckResponse(status=self.status)


@pytest.fixture
def service():
    health = Health()
    server = grpc.server(futures.ThreadPoolExecutor(4))
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    changes = []
    deps = DependencyHealth({"audio": (f"127.0.0.1:{port}", channel)}, lambda name, up: changes.append(up))
    yield health, server, deps, changes
    channel.close()
    server.stop(0)


@pytest.mark.slow  # three checks that wait out their 1 s deadline
def test_a_slow_service_is_down_only_after_several_slow_checks(service):
    health, _, deps, changes = service
    assert deps.check() == (True, "")
    health.delay_s = 1.3  # over the check's 1 s deadline
    for _ in range(DependencyHealth.SLOW_CHECKS_DOWN - 1):
        assert deps.check()[0] is True
    ok, why = deps.check()
    assert not ok and why.startswith("not serving: audio at 127.0.0.1:")
    health.delay_s = 0.0
    assert deps.check()[0] is True and changes == [True, False, True]


def test_not_serving_or_not_listening_is_down_at_once(service):
    health, server, deps, changes = service
    assert deps.check()[0] is True
    health.status = health_pb2.HealthCheckResponse.NOT_SERVING
    assert deps.check()[0] is False
    health.status = health_pb2.HealthCheckResponse.SERVING
    assert deps.check()[0] is True
    server.stop(0).wait()
    assert deps.check()[0] is False and changes == [True, False, True, False]
