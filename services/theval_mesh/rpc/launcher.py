"""Start mesh services as child processes (`theval serve ...`), learn their addresses, wait for
their health, stop them gracefully. Used by `theval mesh up`, the tests and the benchmarks."""
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from theval_mesh.backends.native_logs import QUIET
from theval_mesh.rpc.security import client_channel, is_wildcard

READY = re.compile(r"^(\w+): listening on (\S+):(\d+), metrics on (http://\S+/metrics)")
# Set for the children: their stdin is a pipe from the launcher, and its end (the launcher exited,
# however it died: SIGKILL included) stops them (rpc.server). A thread parent-death signal
# cannot do this: it fires when the THREAD that started the child exits.
EXIT_WITH_LAUNCHER = "THEVAL_EXIT_WITH_LAUNCHER"


EPHEMERAL_FREE_FROM = 20000  # free_port picks from here up to the ephemeral range


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, for a server told its port in advance (a restart reuses it; a client may
    know it before the server is up). Taken below the OS's ephemeral range: a client that keeps
    reconnecting to an ephemeral port with no listener can be given that very port as its own
    source port (TCP self-connect) and then holds it, so the server can never bind it again."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(EPHEMERAL_FREE_FROM, low)
        if _bindable(host, port):
            return port
    raise RuntimeError(f"no free port on {host} in {EPHEMERAL_FREE_FROM}..{low - 1}")


def _ephemeral_low() -> int:
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return max(low, EPHEMERAL_FREE_FROM + 1000)


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


class ChildProcess:
    """A server run as a child process (`proc`): liveness, graceful stop, kill."""
    service = ""
    proc: subprocess.Popen | None = None
    _signalled = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_stop(self):
        """SIGTERM, once: a second one could land after the server restored the default
        handler on its way out, and kill it."""
        if self.proc is not None and self.proc.poll() is None and self._signalled is not self.proc:
            self._signalled = self.proc
            self.proc.send_signal(signal.SIGTERM)

    def terminate(self, timeout: float = 60) -> int | None:
        """SIGTERM (graceful), then SIGKILL after `timeout`; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.signal_stop()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.wait()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# glibc gives each busy thread its own malloc arena (up to 8 per core) and memory freed in one is
# not reused by another: under 8 concurrent calls the evaluator's peak grew 40-76 MiB with 2 videos
# in flight, 24-28 MiB with 2 arenas, so its memory budget holds only with this (the images set it too).
SERVICE_DEFAULTS = {"MALLOC_ARENA_MAX": "2"}


class ServiceProcess(ChildProcess):
    """One `theval serve SERVICE` child. Its stdout is read continuously (the ready line gives
    the bound ports, the rest is copied to `echo`); stderr goes to `stderr` (a file or None)."""

    def __init__(self, service: str, args=(), env=None, stderr=None, echo=None, security=None):
        self.service, self.args = service, list(args)
        self.security = security  # ClientSecurity of health checks on a TLS port
        self.env = {**SERVICE_DEFAULTS, **os.environ, **QUIET, **(env or {})}
        self.stderr, self.echo = stderr, echo
        self.port = self.metrics_port = 0
        self.host = "127.0.0.1"
        self.metrics_url = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, port: int | None = None, metrics_port: int | None = None, timeout: float = 120) -> "ServiceProcess":
        """spawn(), then wait_listening()."""
        return self.spawn(port, metrics_port).wait_listening(timeout)

    def spawn(self, port: int | None = None, metrics_port: int | None = None) -> "ServiceProcess":
        """Start the process. Ports default to the last ones used (a restart keeps its
        address), else any free port."""
        port = self.port if port is None else port
        metrics_port = self.metrics_port if metrics_port is None else metrics_port
        cmd = [sys.executable, "-m", "theval_mesh.rpc.main", self.service, "--port", str(port),
               "--metrics-port", str(metrics_port), *self.args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env={**self.env, EXIT_WITH_LAUNCHER: "1"}, text=True,
                                     start_new_session=True)  # Ctrl-C reaches the launcher only
        self._lines: queue.Queue = queue.Queue()
        self._cmd = cmd
        threading.Thread(target=self._read, args=(self.proc, self._lines), daemon=True).start()
        return self

    def wait_listening(self, timeout: float = 120) -> "ServiceProcess":
        """Wait for the line that gives the bound ports (not for health)."""
        lines, cmd = self._lines, self._cmd
        end = time.monotonic() + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise RuntimeError(f"{self.service} did not start within {timeout:.0f} s") from None
            if line is None:
                raise RuntimeError(f"{self.service} exited with code {self.proc.wait()} before listening "
                                   f"(command: {' '.join(cmd)})")
            match = READY.match(line)
            if match:
                host = match.group(2)
                # A server on all interfaces is reached on loopback (where its certificate names it).
                self.host = "127.0.0.1" if is_wildcard(host) else host
                self.port, self.metrics_url = int(match.group(3)), match.group(4)
                self.metrics_port = int(self.metrics_url.rsplit(":", 1)[1].split("/")[0])
                return self

    def _read(self, proc, lines):
        ready = False
        for line in proc.stdout:
            if not ready:
                lines.put(line)
                ready = bool(READY.match(line))
            elif self.echo:
                self.echo(self.service, line.rstrip("\n"))
        lines.put(None)

    def health(self, timeout: float = 1.0) -> str:
        """SERVING, NOT_SERVING, ... or DOWN when it does not answer."""
        with client_channel(self.address, self.security) as channel:
            try:
                status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            except grpc.RpcError:
                return "DOWN"
        return health_pb2.HealthCheckResponse.ServingStatus.Name(status.status)

    def wait_for(self, status: str = "SERVING", timeout: float = 120) -> "ServiceProcess":
        end = time.monotonic() + timeout
        while (now := self.health()) != status:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.service} exited with code {self.proc.returncode}")
            if time.monotonic() > end:
                raise RuntimeError(f"{self.service} is {now}, not {status}, after {timeout:.0f} s")
            time.sleep(0.1)
        return self


def stop_all(procs, first=(), timeout: float = 60) -> dict:
    """SIGTERM `first` and wait for them (e.g. the evaluator, whose calls use the others),
    then SIGTERM the rest together and wait; returns {service: exit code}."""
    codes = {p.service: p.terminate(timeout) for p in procs if p.service in first}
    rest = [p for p in procs if p.service not in first]
    for p in rest:
        p.signal_stop()
    codes.update({p.service: p.terminate(timeout) for p in rest})
    return codes
