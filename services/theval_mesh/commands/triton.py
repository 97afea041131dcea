"""`theval triton up`: a real Triton server on this machine with the project's model repository."""
import os
import signal
import sys
import threading
from pathlib import Path

from theval_mesh.backends.private_files import new_private_folder, open_log
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.services import TRITON_CALLERS
from theval_mesh.pure.user_names import check_name

DEFAULT_PORTS = {"grpc": 8001, "http": 8000, "metrics": 8002}  # Triton's own defaults


def register(sub):
    p = sub.add_parser("triton", help="run a Triton server with the project's model repository",
                       description="`theval triton up` starts the tritonserver bundled in the nvidia-pytriton "
                                   "wheel with triton_models/ (topiq_iaa, topiq_nr_face, musiq, musiq_spaq, "
                                   "silero_vad) and prints its gRPC, HTTP and metrics addresses. The quality "
                                   "and audio services use it with --backend triton --triton-url HOST:PORT.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start Triton; Ctrl-C stops it")
    up.add_argument("--model-repository", metavar="DIR", default=None,
                    help="the model repository (default $THEVAL_TRITON_MODELS or the project's triton_models/)")
    up.add_argument("--weights-store", metavar="DIR", default=None,
                    help="quality model weights folder (default $THEVAL_WEIGHTS or ~/.cache/theval/weights)")
    up.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    for name, port in DEFAULT_PORTS.items():
        env = f"THEVAL_TRITON_{name.upper()}_PORT"  # also what the triton image's health check reads
        up.add_argument(f"--{name}-port", type=int, default=int(os.environ.get(env) or port), metavar="PORT",
                        help=f"{name} port (default {port}; 0: any free port) [env {env}]")
    _access_options(up, "required with a --host beyond loopback")
    up.add_argument("--model", action="append", default=None, metavar="NAME",
                    help="load only this model (repeatable; default: every model of the repository)")
    up.add_argument("--config-name", default=None, metavar="NAME",
                    help="load configs/NAME.pbtxt instead of config.pbtxt (e.g. gpu: KIND_GPU instances)")
    up.add_argument("--log", default=None, metavar="FILE",
                    help="Triton's own log (default: a file in the temp folder, printed at start)")
    up.set_defaults(func=run)
    front = actions.add_parser(
        "front", help="serve a Triton that runs elsewhere in the pod (on loopback) to the mesh, behind the caller check",
        description="Triton's front alone: mutual TLS, only the --allowed-callers' certificates, each call forwarded "
                    "to the plaintext tritonserver at --backend. `theval triton up` with TLS runs it itself; a "
                    "deployment that runs tritonserver directly (NVIDIA's GPU image) runs it beside it.")
    front.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    front.add_argument("--port", type=int, default=int(os.environ.get("THEVAL_TRITON_GRPC_PORT") or DEFAULT_PORTS["grpc"]),
                       metavar="PORT", help=f"gRPC port (default {DEFAULT_PORTS['grpc']}) [env THEVAL_TRITON_GRPC_PORT]")
    front.add_argument("--backend", required=True, metavar="HOST:PORT",
                       help="tritonserver's plaintext gRPC address, on loopback (e.g. 127.0.0.1:8011)")
    _access_options(front, "required")
    front.set_defaults(func=run_front)


def _access_options(parser, when: str):
    """Mutual TLS and the certificate names that may call."""
    for flag, env, text in (("--tls-cert", "THEVAL_TLS_CERT", "PEM certificate of this server: gRPC over TLS"),
                            ("--tls-key", "THEVAL_TLS_KEY", "PEM private key of --tls-cert"),
                            ("--tls-client-ca", "THEVAL_TLS_CLIENT_CA",
                             "PEM CA certificate: callers must present a certificate it signed (mutual TLS)")):
        parser.add_argument(flag, default=os.environ.get(env) or None, metavar="FILE",
                            help=f"{text}; {when} [env {env}]")
    parser.add_argument("--allowed-callers", default=os.environ.get("THEVAL_ALLOWED_CALLERS") or ",".join(TRITON_CALLERS),
                        metavar="NAMES", help="with TLS, the certificate names (common names) that may call, separated "
                        f"by commas (default {','.join(TRITON_CALLERS)}: the services whose models run on Triton) "
                        "[env THEVAL_ALLOWED_CALLERS]")


def _open_log(args, log_path: Path):
    """--log as given (a deployment passes /dev/stdout, a link); the default, in a new private
    folder, never through a link."""
    return open(log_path, "a") if getattr(args, "log", None) else open_log(log_path)


def start(args, log_path: Path):
    """The started TritonServer for these options."""
    from theval_mesh.rpc.triton.repository import default_repository
    from theval_mesh.rpc.triton.server import TritonServer
    repository = Path(args.model_repository) if args.model_repository else default_repository()
    if not repository.is_dir():
        raise UserError(f"--model-repository {repository}: not a folder")
    server = TritonServer(repository, host=args.host, grpc_port=args.grpc_port, http_port=args.http_port,
                          metrics_port=args.metrics_port, models=args.model, weights_store=args.weights_store,
                          config_name=args.config_name, log=_open_log(args, log_path), tls=_tls(args),
                          allowed_callers=_callers(args.allowed_callers))
    try:
        return server.start()
    except RuntimeError as err:
        server.close()
        raise UserError(f"Triton could not start: {err}; its log: {log_path}") from None


def _callers(text: str) -> tuple:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise UserError("--allowed-callers: name at least one certificate (e.g. quality,audio,headpose)")
    return tuple(check_name("--allowed-callers", n) for n in names)


def _tls(args):
    given = (args.tls_cert, args.tls_key, args.tls_client_ca)
    if any(given) and not all(given):
        raise UserError("Triton's TLS is mutual: give --tls-cert, --tls-key and --tls-client-ca together")
    for path in filter(None, given):
        if not Path(path).is_file():
            raise UserError(f"{path}: no such file")
    return given if all(given) else None


def run_front(args) -> int:
    """Triton's front until SIGTERM or Ctrl-C."""
    from theval_mesh.rpc.triton.front import TritonFront
    tls = _tls(args)
    if tls is None:
        raise UserError("theval triton front: give --tls-cert, --tls-key and --tls-client-ca (the front is mutual TLS)")
    host = check_backend(args.backend)
    try:
        front = TritonFront(f"{args.host}:{args.port}", tls, _callers(args.allowed_callers), args.backend)
    except RuntimeError as err:
        raise UserError(str(err)) from None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"Triton's front: {args.host}:{args.port} (mutual TLS, callers {args.allowed_callers}) -> {host}",
          flush=True)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    front.close()
    return 0


def check_backend(address: str) -> str:
    """--backend: on loopback, where plaintext cannot leave the machine (or the pod)."""
    host, _, port = address.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "[::1]") or not port.isdigit():
        raise UserError(f"--backend {address}: give tritonserver's address on loopback, e.g. 127.0.0.1:8011 "
                        "(its gRPC is plaintext behind the front)")
    return address


def print_states(server, stream=sys.stdout):
    from theval_mesh.rpc.triton.client import TritonClient
    # Asked from this machine: behind the front (TLS), of tritonserver itself on loopback.
    client = TritonClient(f"127.0.0.1:{server.ports['backend_grpc']}" if server.tls else server.address)
    try:
        for name, (state, reason) in sorted(client.states().items()):
            why = f"  {reason.splitlines()[0]}" if reason and state != "READY" else ""
            print(f"  {name:<14} {state}{why}", file=stream)
    finally:
        client.close()


def run(args) -> int:
    log_path = Path(args.log) if args.log else new_private_folder("theval-triton-log-") / "triton.log"
    print(f"theval triton: starting (its log: {log_path}) ...", flush=True)
    server = start(args, log_path)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    died = False
    try:
        print(f"Triton is up: gRPC {server.address}, HTTP {server.http_url}, metrics {server.metrics_url}")
        print_states(server)
        print(f"Use it with: theval serve quality --backend triton --triton-url {server.address} ...  "
              "Ctrl-C stops it.", flush=True)
        while not stop.wait(0.5):
            if not server.alive():
                died = True
                break
    except KeyboardInterrupt:
        pass
    if died:
        print(f"theval triton: tritonserver exited with code {server.proc.returncode}; see {log_path}",
              file=sys.stderr)
    else:
        print("\ntheval triton: stopping ...", file=sys.stderr, flush=True)
    server.close()
    if not died:
        print("theval triton: stopped", file=sys.stderr)
    return 1 if died else 0
