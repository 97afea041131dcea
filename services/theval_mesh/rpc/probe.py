"""`python -m theval_mesh.rpc.probe`: is the mesh server of this environment SERVING? The health
check of the container images (and of Kubernetes exec probes): it reads the server's own THEVAL_*
settings, calls grpc.health.v1 on 127.0.0.1:THEVAL_PORT and exits 0 when SERVING, 1 otherwise.

With TLS on (THEVAL_TLS_CERT) it trusts THEVAL_TLS_CA, else THEVAL_TLS_CLIENT_CA, else the server's
own certificate, and presents the server's certificate as its client certificate (a server that
requires one trusts its own CA). Health needs no token. Imports grpc only: it runs every few seconds.
`--live`: exit 0 when the server answers at all, SERVING or not (a liveness probe: an evaluator
whose dependency is down is NOT_SERVING, not dead, and must not be restarted for it).
`--ray`: a Ray node's raylet, through its dashboard agent (what KubeRay's own probes ask, with
Python instead of wget, which the images do not have).
`--triton`: Triton's own readiness (HTTP /v2/health/ready on THEVAL_TRITON_HTTP_PORT, default 8000).
`--front`: Triton's front (`theval triton front`) accepts connections on THEVAL_TRITON_GRPC_PORT
(default 8001), and the Triton behind it is ready (`--triton`).
"""
import os
import socket
import sys
import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from theval_mesh.rpc.security import ClientSecurity, client_channel, own_security


def probe_security(environ) -> ClientSecurity | None:
    return own_security(environ.get("THEVAL_TLS_CERT"), environ.get("THEVAL_TLS_KEY"), environ.get("THEVAL_TLS_CA"),
                        environ.get("THEVAL_TLS_CLIENT_CA"))


def check(environ=None, timeout: float = 3.0) -> str:
    """SERVING, NOT_SERVING, ... or the reason it could not ask."""
    env = os.environ if environ is None else environ
    port = env.get("THEVAL_PORT", "")
    if not port.isdigit() or int(port) == 0:
        return f"THEVAL_PORT is {port!r}: the probe needs the server's fixed port"
    with client_channel(f"127.0.0.1:{port}", probe_security(env)) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.RpcError as err:
            return f"{err.code().name}: {err.details()}"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)


def _http_ok(url: str, timeout: float, expect: bytes = b"") -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            body = answer.read(4096)
    except (OSError, urllib.error.URLError) as err:
        return f"{url}: {err}"
    return "SERVING" if expect in body else f"{url}: {body[:200]!r}"


def check_triton(environ=None, timeout: float = 3.0) -> str:
    env = os.environ if environ is None else environ
    return _http_ok(f"http://127.0.0.1:{env.get('THEVAL_TRITON_HTTP_PORT') or 8000}/v2/health/ready", timeout)


def check_front(environ=None, timeout: float = 3.0) -> str:
    env = os.environ if environ is None else environ
    port = int(env.get("THEVAL_TRITON_GRPC_PORT") or 8001)
    try:
        socket.create_connection(("127.0.0.1", port), timeout).close()
    except OSError as err:
        return f"127.0.0.1:{port}: {err}"
    return check_triton(env, timeout)


def check_ray(environ=None, timeout: float = 3.0) -> str:
    env = os.environ if environ is None else environ
    port = env.get("RAY_DASHBOARD_AGENT_LISTEN_PORT") or 52365  # Ray's default
    return _http_ok(f"http://127.0.0.1:{port}/api/local_raylet_healthz", timeout, b"success")


ANSWERS = set(health_pb2.HealthCheckResponse.ServingStatus.keys())
MODES = ([], ["--live"], ["--triton"], ["--front"], ["--ray"])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in MODES:
        print("usage: python -m theval_mesh.rpc.probe [--live | --triton | --front | --ray]", file=sys.stderr)
        return 2
    checks = {"--triton": check_triton, "--front": check_front, "--ray": check_ray}  # else gRPC health (--live too)
    status = checks.get(argv[0] if argv else "", check)()
    print(status)
    return 0 if status == "SERVING" or (argv == ["--live"] and status in ANSWERS) else 1


if __name__ == "__main__":
    sys.exit(main())
