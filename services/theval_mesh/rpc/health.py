"""Honest grpc.health.v1: NOT_SERVING until the models are loaded, when they cannot be (missing
weights), and while a service this one depends on is not SERVING."""
import logging
import threading

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

log = logging.getLogger("theval.health")
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
CHECK_INTERVAL_S = 0.5


class Health:
    """Holds the health servicer; a thread re-evaluates the status every CHECK_INTERVAL_S."""

    def __init__(self, name: str, service_names: list[str], readiness=None):
        self.name = name
        self.servicer = health.HealthServicer(experimental_non_blocking=True)
        self.service_names = [""] + list(service_names)
        self.readiness = readiness  # () -> (ok, why not); e.g. the dependencies' health
        self.loaded = False
        self.load_error: str | None = "loading models"
        self._stop = threading.Event()
        self._status = None
        self._set(NOT_SERVING, "starting")

    def _set(self, status, why: str):
        if status == self._status:
            return
        self._status = status
        for n in self.service_names:
            self.servicer.set(n, status)
        state = "SERVING" if status == SERVING else f"NOT_SERVING ({why})"
        log.info("%s: %s", self.name, state)

    def load(self, load_fn):
        """Run the model loading; a failure (e.g. missing weights) keeps NOT_SERVING, with why."""
        try:
            if load_fn:
                load_fn()
            self.loaded, self.load_error = True, None
        except Exception as err:  # noqa: BLE001 - reported through health and the log
            self.load_error = f"cannot load: {err}"
            log.error("%s: %s", self.name, self.load_error)
        self.update()

    def update(self):
        if self._stop.is_set():
            return
        if not self.loaded:
            self._set(NOT_SERVING, self.load_error or "loading")
            return
        ok, why = self.readiness() if self.readiness else (True, "")
        self._set(SERVING if ok else NOT_SERVING, why)

    def watch(self):
        def loop():
            while not self._stop.wait(CHECK_INTERVAL_S):
                self.update()
        threading.Thread(target=loop, name="health", daemon=True).start()

    def shutdown(self):
        self._stop.set()
        self.servicer.enter_graceful_shutdown()


class DependencyHealth:
    """The health of the services this one calls, checked through grpc.health.v1. A service that
    answers NOT_SERVING, or does not listen, is down at once; one that is only slow to answer (busy
    on 2 cores, its check queued behind its work) is down after SLOW_CHECKS_DOWN checks in a row, so
    that a loaded mesh does not flap its readiness."""
    SLOW_CHECKS_DOWN = 3

    def __init__(self, channels: dict[str, tuple[str, grpc.Channel]], on_change=None):
        self.stubs = {name: (address, health_pb2_grpc.HealthStub(channel))
                      for name, (address, channel) in channels.items()}
        self.up = dict.fromkeys(channels, False)
        self.slow = dict.fromkeys(channels, 0)  # checks in a row that timed out
        self.on_change = on_change  # (name, up) -> None

    def check(self) -> tuple[bool, str]:
        down = []
        for name, (address, stub) in self.stubs.items():
            try:
                up = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0).status == SERVING
                self.slow[name] = 0
            except grpc.RpcError as err:
                slow = err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                self.slow[name] = self.slow[name] + 1 if slow else 0
                up = self.up[name] and 0 < self.slow[name] < self.SLOW_CHECKS_DOWN
            if up != self.up[name] and self.on_change:
                self.on_change(name, up)
            self.up[name] = up
            if not up:
                down.append(f"{name} at {address}")
        return not down, ("not serving: " + ", ".join(down)) if down else ""
