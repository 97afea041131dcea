"""The mesh inside the test process: the four leaf services and the evaluator, each on a gRPC server
of its own on a loopback port, built from the Service its module's register(cfg) returns, with
real backends (MediaPipe FaceMesh, Silero VAD, the quality proxy) and real configs (rpc.config.load).

Each server is the one rpc.server.build makes for `theval serve` (interceptors, message limits,
health, reflection), without what belongs to a process of its own: signal handling, the Prometheus
HTTP port, the launcher's pipe. Leaves can be stopped and started again on their port (a service
that restarts).

The evaluator can be built once per process only: its job store's Prometheus collector goes into
the process-wide registry (jobs.job_telemetry.register_jobs), which refuses a second one.
"""
import argparse
import importlib
import threading
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from theval_mesh.rpc import config as mesh_config
from theval_mesh.rpc.main import SERVICE_MODULES as MODULES
from theval_mesh.rpc.security import client_channel
from theval_mesh.rpc.server import build
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc

MAX_VIDEO_BYTES = 256 * 1024  # the session mesh's (tests/unit/conftest.py) limit on a video sent as bytes


class CallLog(grpc.ServerInterceptor):
    """Test instrumentation on a real server: records when each call of a method arrives (its
    request, for unary calls), and can hold those calls at a gate until it opens."""

    def __init__(self, method: str):
        self.method = method
        self.calls: list[tuple[float, object]] = []  # (time.monotonic(), request)
        self.gate = threading.Event()
        self.gate.set()
        self.held = 0
        self._lock = threading.Lock()

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or not details.method.endswith("/" + self.method) or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        def behaviour(request, context):
            with self._lock:
                self.calls.append((time.monotonic(), request))
                self.held += 1
            try:
                self.gate.wait()
            finally:
                with self._lock:
                    self.held -= 1
            return inner(request, context)
        return grpc.unary_unary_rpc_method_handler(behaviour, handler.request_deserializer,
                                                   handler.response_serializer)

    def requests(self, since: int = 0) -> list:
        with self._lock:
            return [r for _, r in self.calls[since:]]

    def times(self) -> list[float]:
        with self._lock:
            return [t for t, _ in self.calls]


class Server:
    """One service on its own gRPC server in this process."""

    def __init__(self, cfg, service, interceptors=()):
        self.cfg, self.service, self.interceptors = cfg, service, list(interceptors)
        self.port = cfg.port
        self.server = self.health = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self):
        cfg, service = self.cfg, self.service
        server, health, port = build(cfg, service, self.port, self.interceptors)
        assert port, f"{cfg.service}: cannot listen on 127.0.0.1:{self.port}"
        self.port = port
        if service.on_bound:
            service.on_bound("127.0.0.1", port)
        server.start()
        health.load(service.load)  # here, not in a thread: the server is ready when start() returns
        assert health.loaded, f"{cfg.service}: {health.load_error}"
        health.watch()
        self.server, self.health = server, health
        return self

    def stop(self):
        """Stop now (in-flight calls are cancelled); the port is free once this returns."""
        if self.server is not None:
            self.health.shutdown()
            self.server.stop(0).wait()
            self.server = None


def load_config(service: str, **flags):
    """rpc.config.load(service) from flags alone (no THEVAL_* variable of this process leaks in)."""
    return mesh_config.load(service, argparse.Namespace(port=0, metrics_port=0, **flags), environ={})


class InProcessMesh:
    """The four leaves and the evaluator. `evaluate_log` records (and can hold) Evaluate calls."""

    def __init__(self, tmp, roots, **evaluator_flags):
        self.tmp, self.roots = Path(tmp), [str(r) for r in roots]
        self.root = Path(roots[0])  # where the tests write videos the mesh may read
        self.evaluator_flags = {"quality": "proxy", "retries": 0, **evaluator_flags}
        self.leaves: dict[str, Server] = {}
        self.evaluator: Server | None = None
        self.evaluate_log = CallLog("Evaluate")
        self.channel = None

    def start(self):
        for name in mesh_config.DEPENDENCIES:
            flags = {} if name == "headpose" else {"allow_root": list(self.roots)}
            if name == "quality":
                flags["quality"] = "proxy"
            cfg = load_config(name, **flags)
            self.leaves[name] = Server(cfg, importlib.import_module(MODULES[name]).register(cfg)).start()
        addresses = {f"{n}_addr": s.address for n, s in self.leaves.items()}
        cfg = load_config("evaluator", allow_root=list(self.roots), store=str(self.tmp / "evaluator.sqlite"),
                          **addresses, **self.evaluator_flags)
        self.evaluator_config = cfg
        service = importlib.import_module(MODULES["evaluator"]).register(cfg)
        self.evaluator = Server(cfg, service, [self.evaluate_log]).start()
        self.channel = client_channel(self.evaluator.address, None,
                                      options=[("grpc.max_send_message_length", 1 << 30)])
        return self

    def restart(self, name: str, timeout: float = 60):
        """Start the stopped leaf `name` again on its port; returns once the evaluator's health says
        SERVING again (it checks its dependencies every rpc.health.CHECK_INTERVAL_S)."""
        self.leaves[name].start()
        self.wait_serving(timeout)

    def wait_serving(self, timeout: float = 60):
        """Returns once the evaluator's health says SERVING (all its dependencies up), from a check
        made now: its own loop may not yet have seen a leaf that was just stopped, and a call would
        then meet the evaluator's channel still in its reconnect backoff."""
        stub = health_pb2_grpc.HealthStub(self.channel)
        end = time.monotonic() + timeout
        serving = health_pb2.HealthCheckResponse.SERVING
        while True:
            self.evaluator.health.update()  # the dependencies checked through the evaluator's channels
            if stub.Check(health_pb2.HealthCheckRequest(), timeout=timeout).status == serving:
                return
            assert time.monotonic() < end, "the evaluator does not serve: a dependency is down"
            time.sleep(0.05)

    @property
    def stub(self) -> evaluator_pb2_grpc.EvaluatorServiceStub:
        return evaluator_pb2_grpc.EvaluatorServiceStub(self.channel)

    def evaluate(self, uri=None, content=None, timeout=60, **kw):
        ref = common_pb2.VideoRef(uri=str(uri)) if uri is not None else common_pb2.VideoRef(content=content)
        return self.stub.Evaluate(evaluator_pb2.EvaluateRequest(video=ref, **kw), timeout=timeout)

    def stop(self):
        if self.channel is not None:
            self.channel.close()
        for s in [self.evaluator, *self.leaves.values()]:
            if s is not None:
                s.stop()
        if self.evaluator is not None and self.evaluator.service.on_stop:
            self.evaluator.service.on_stop()
