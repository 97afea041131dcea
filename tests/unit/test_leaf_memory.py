"""A leaf's reservation (rpc.servicers.common.LeafMemory) on a real gRPC server on loopback: it
lasts until the call has ended, and a call whose caller went before it reserved leaves nothing
reserved."""
import threading
import time
from concurrent import futures

import grpc

from theval_mesh.rpc.config import load
from theval_mesh.rpc.memory_budget import MIB
from theval_mesh.rpc.servicers.common import LeafMemory

METHOD = "/test.Leaf/Call"


def _server(behavior):
    server = grpc.server(futures.ThreadPoolExecutor(2))
    handler = grpc.unary_unary_rpc_method_handler(behavior)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Leaf", {"Call": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary(METHOD)


def _until(condition, timeout=10):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end
        time.sleep(0.01)


def test_a_reservation_lasts_until_the_call_ends_even_one_made_after_the_caller_went(tmp_path):
    memory = LeafMemory(load("landmarks", environ={"THEVAL_MEMORY_BUDGET_MB": "10", "THEVAL_PORT": "0", "THEVAL_METRICS_PORT": "0",
                                                   "THEVAL_ALLOWED_ROOTS": str(tmp_path)}))
    seen, started, late = [], threading.Event(), threading.Event()

    def behavior(request, context):
        if request == b"late":
            started.set()  # reserve only once the call is over: its callbacks have run
            _until(lambda: not context.is_active())
            _until(lambda: not context.add_callback(lambda: None))
            memory.reserve(4 * MIB, "late.mp4", context)
            seen.append(memory.budget.used)
            late.set()
            return b""
        memory.reserve(4 * MIB, "clip.mp4", context)
        seen.append(memory.budget.used)
        return b"ok"
    server, call = _server(behavior)
    try:
        assert call(b"now", timeout=10) == b"ok"
        _until(lambda: memory.budget.used == 0)  # released once the call ended
        future = call.future(b"late", timeout=30)
        assert started.wait(10)
        future.cancel()
        assert late.wait(10)
        assert seen == [4 * MIB, 0] and memory.budget.used == 0
    finally:
        server.stop(0)
