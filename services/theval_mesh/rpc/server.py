"""Start one mesh server: gRPC with health, reflection and metrics, Prometheus /metrics, models
loaded in the background, graceful stop on SIGTERM or Ctrl-C."""
import logging
import os
import signal
import sys
import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from theval_mesh.pure.exit_codes import EXIT_ERROR, EXIT_OK
from theval_mesh.rpc.admission import RESERVED_THREADS, AdmissionInterceptor
from theval_mesh.rpc.config import Config
from theval_mesh.rpc.health import Health
from theval_mesh.rpc.launcher import EXIT_WITH_LAUNCHER
from theval_mesh.rpc.security import AuthInterceptor, CallerInterceptor, server_credentials
from theval_mesh.rpc.telemetry import MetricsInterceptor, start_http

log = logging.getLogger("theval.server")


def channel_options(max_message_bytes: int) -> list:
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            # A restarted service is found again within a second, not grpc's default 2 min.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            # Every address the name resolves to gets calls: on Kubernetes a headless Service
            # resolves to each pod, so replicas an autoscaler adds take their share.
            ("grpc.lb_policy_name", "round_robin")]


# Servers close each connection after this age (grpc adds +-10 % jitter): their clients connect
# again and resolve the name again, so they find the replicas added since. Calls in flight keep
# their connection until they end (the grace is the longest a call may last).
CONNECTION_AGE_S = 60


def setup_logging():
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")


@dataclass
class Service:
    """What a servicer module gives the bootstrap."""
    add: Callable                       # add(server) -> full names of the gRPC services added
    load: Callable | None = None        # loads the models; NOT_SERVING until it returns
    readiness: Callable | None = None   # () -> (ok, why not): e.g. the dependencies' health
    on_stop: Callable | None = None     # after the last call finished
    receive_limit: int | None = None    # largest request accepted (default max_message_bytes)
    on_bound: Callable | None = None    # (host, port) once the gRPC port is bound


def _until_launcher_exits(name: str, stop: threading.Event):
    """Blocks on stdin, the launcher's pipe (rpc.launcher): end of file = the launcher is gone.
    os.read, not sys.stdin: a daemon thread blocked inside the buffered reader holds its lock, and
    CPython aborts at exit when it cannot take that lock (a graceful stop would exit 134)."""
    while os.read(0, 4096):
        pass
    log.warning("%s: its launcher exited: stopping", name)
    stop.set()


def build(config: Config, service: Service, port: int | None = None, interceptors=()) -> tuple:
    """The server of `service`: its interceptors, message limits, health and reflection, bound to
    config.host and `port` (default config.port) but not started. Returns (server, health, bound port;
    0 when the port could not be bound). interceptors: more, innermost (the tests' instruments)."""
    name = config.service
    server = grpc.server(
        # API calls never hold the reserved threads: health and refusals always find one.
        futures.ThreadPoolExecutor(max_workers=config.workers + RESERVED_THREADS, thread_name_prefix=name),
        # Metrics first: refused calls (no token, server full) are counted too.
        interceptors=[MetricsInterceptor(name)] + ([AuthInterceptor(config.tokens)] if config.tokens else [])
        + ([CallerInterceptor(name, config.allowed_callers)] if config.tls_client_ca and config.allowed_callers else [])
        + [AdmissionInterceptor(name, config.workers, config.streams, config.stream_max_s, config.tokens,
                                config.caller_streams)] + list(interceptors),
        options=[("grpc.max_send_message_length", config.max_message_bytes),
                 ("grpc.max_receive_message_length", service.receive_limit or config.max_message_bytes),
                 # Receive windows no wider than what is being read (64 KB beyond): unread requests
                 # of a stream stay with its client. BDP probing widens them to hold whole ones.
                 ("grpc.http2.bdp_probe", 0),
                 ("grpc.so_reuseport", 0),  # a taken port is an error, not a shared one
                 ("grpc.max_connection_age_ms", CONNECTION_AGE_S * 1000),
                 ("grpc.max_connection_age_grace_ms", int((config.stream_max_s + config.grace_s) * 1000))])
    names = service.add(server)
    health = Health(name, names, service.readiness)
    health_pb2_grpc.add_HealthServicer_to_server(health.servicer, server)
    reflection.enable_server_reflection(
        list(names) + [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
        server)
    credentials = server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)
    address = f"{config.host}:{config.port if port is None else port}"
    try:
        bound = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    except RuntimeError:  # grpc raises on a port it cannot bind
        bound = 0
    return server, health, bound


def serve(config: Config, service: Service) -> int:
    """Run until SIGTERM or Ctrl-C; returns the exit code."""
    name = config.service
    server, health, port = build(config, service)
    credentials = bool(config.tls_cert)  # what build() bound the port with
    if not port:
        print(f"error: {name}: cannot listen on {config.host}:{config.port} (port in use?); "
              "choose another with --port", file=sys.stderr)
        return EXIT_ERROR
    try:
        metrics_server, metrics_port = start_http(config.host, config.metrics_port)
    except OSError as err:
        print(f"error: {name}: cannot serve metrics on {config.host}:{config.metrics_port} ({err.strerror}); "
              "choose another with --metrics-port", file=sys.stderr)
        return EXIT_ERROR
    if service.on_bound:
        service.on_bound(config.host, port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    callers = f" named {', '.join(sorted(config.allowed_callers))}" if config.allowed_callers else ""
    guards = (["TLS" + (f" with client certificates{callers}" if config.tls_client_ca else "")] if credentials else []) + \
        ([f"bearer tokens of {len(config.tokens)} identities"] if config.tokens else [])
    print(f"{name}: listening on {config.host}:{port}, metrics on http://{config.host}:{metrics_port}/metrics"
          f" ({', '.join(guards) or 'plaintext, no authentication: loopback only'})", flush=True)
    threading.Thread(target=health.load, args=(service.load,), name="load", daemon=True).start()
    if os.environ.get(EXIT_WITH_LAUNCHER) == "1":
        threading.Thread(target=_until_launcher_exits, args=(name, stop), name="launcher", daemon=True).start()
    health.watch()
    while not stop.wait(0.5):
        pass
    log.info("%s: stopping; in-flight calls get %.0f s to finish", name, config.grace_s)
    health.shutdown()
    server.stop(config.grace_s).wait()
    if service.on_stop:
        service.on_stop()
    metrics_server.shutdown()
    log.info("%s: stopped", name)
    return EXIT_OK
