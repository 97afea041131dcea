"""How a served call's end is named (a passed deadline or a cancel), on a real gRPC server on
loopback, and the ports the launcher picks for servers told their port in advance."""
import threading
import time
from concurrent import futures

import grpc
import pytest

from theval_mesh.backends import liveness
from theval_mesh.rpc.launcher import _ephemeral_low, free_port


def test_free_ports_stay_below_the_ephemeral_range():
    """A client reconnecting to an ephemeral port nobody listens on can self-connect and hold
    it; ports given to servers in advance come from below that range, so a restart can bind."""
    low = _ephemeral_low()
    ports = {free_port() for _ in range(20)}
    assert all(1024 < p < low for p in ports), (ports, low)
    assert len(ports) > 1  # picked at random: parallel users rarely collide


@pytest.fixture()
def server():
    """A unary method that waits until its caller is gone and records how liveness names it."""
    seen, gone = [], threading.Event()

    def wait(request, context):
        cancelled = liveness.of_call(context)
        while (code := cancelled()) is None:
            time.sleep(0.01)
        seen.append(code)
        gone.set()
        return b""

    handler = grpc.method_handlers_generic_handler(
        "t.T", {"Wait": grpc.unary_unary_rpc_method_handler(wait)})
    srv = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel.unary_unary("/t.T/Wait"), seen, gone
    srv.stop(None)


def test_a_passed_deadline_is_named_so(server):
    call, seen, gone = server
    with pytest.raises(grpc.RpcError) as err:
        call(b"", timeout=0.5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert gone.wait(5) and seen == ["DEADLINE_EXCEEDED"]


def test_a_cancel_well_before_the_deadline_is_a_cancel(server):
    call, seen, gone = server
    future = call.future(b"", timeout=60)
    time.sleep(0.3)
    future.cancel()
    assert gone.wait(5) and seen == ["CANCELLED"]
