"""`theval mesh up`: the whole gRPC metric mesh on this machine, one process per service."""
import argparse
import os
import signal
import sys
import threading
import time

from theval_mesh.backends.private_files import new_private_folder, open_log
from theval_mesh.pure.errors import UsageRefused, UserError
from theval_mesh.pure.exit_codes import EXIT_ERROR
from theval_mesh.pure.services import BY_NAME, DEPENDENCIES, SERVICES
from theval_mesh.rpc import config
from theval_mesh.rpc.config import ON_TRITON
from theval_mesh.rpc.launcher import ServiceProcess, stop_all
from theval_mesh.rpc.security import certificate_name, own_security

LEAVES = tuple(s for s in SERVICES if s != "evaluator")  # started first: the evaluator may call them
STOP_ORDER = ("evaluator",) + LEAVES  # the evaluator first, so its calls can finish
EVALUATOR_PORT, EVALUATOR_METRICS_PORT = BY_NAME["evaluator"].port, BY_NAME["evaluator"].metrics_port


def register(sub):
    p = sub.add_parser("mesh", help="run the gRPC metric mesh on this machine",
                       description=f"`theval mesh up` starts the {', '.join(SERVICES[:-1])} and {SERVICES[-1]} "
                                   "services, each as its own process on loopback ports, and "
                                   "prints their addresses. Ctrl-C stops them all.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start every service; Ctrl-C stops them")
    config.add_options(up)
    up.add_argument("--triton", action="store_true",
                    help="also start a Triton server with the project's triton_models/ and run the quality and "
                         "audio models on it, and FaceXFormer when the head-pose service serves it (as --backend "
                         "triton --triton-url does for running services)")
    up.set_defaults(func=run, port=None, metrics_port=None)
    for action in up._actions:  # the evaluator's ports; the other services take free ports
        if action.dest == "port":
            action.help = f"the evaluator's gRPC port (default {EVALUATOR_PORT}) [env THEVAL_PORT]"
        elif action.dest == "metrics_port":
            action.help = (f"the evaluator's /metrics port (default {EVALUATOR_METRICS_PORT}) "
                           "[env THEVAL_METRICS_PORT]")
    prom = actions.add_parser("prometheus-config", help="print a Prometheus configuration scraping a mesh",
                              description="Print a Prometheus configuration (JSON, which Prometheus reads as YAML) "
                                          "that scrapes each given server's /metrics under job=\"theval\" with a "
                                          "`service` label, as monitoring/rules.yml and dashboard.json expect.")
    prom.add_argument("--target", action="append", required=True, metavar="SERVICE=HOST:PORT",
                      help="a server's metrics address (repeatable), e.g. evaluator=127.0.0.1:9464")
    prom.add_argument("--rules", action="append", default=[], metavar="FILE",
                      help="a rule file to load (repeatable), e.g. monitoring/rules.yml")
    prom.add_argument("--interval", type=float, default=15.0, metavar="S", help="scrape interval (default 15 s)")
    prom.set_defaults(func=print_prometheus_config)


def print_prometheus_config(args) -> int:
    from theval_mesh.rpc.scrape_config import prometheus_config_text
    targets = {}
    for target in args.target:
        service, _, address = target.partition("=")
        if not service or ":" not in address:
            raise UsageRefused(f"--target {target}: expected SERVICE=HOST:PORT")
        targets[service] = address
    sys.stdout.write(prometheus_config_text(targets, args.interval, args.rules))
    return 0


def _flags(args, service: str) -> list[str]:
    """The options given on the command line that `service` takes, as its flags."""
    out = []
    for o in config.OPTIONS:
        value = getattr(args, o.dest, None)
        if value is None or service not in o.services or o.dest in ("port", "metrics_port"):
            continue
        if o.kind is bool:
            out.append(o.flag)
        elif o.kind is list:
            for v in value:
                out += [o.flag, v]
        else:
            out += [o.flag, str(value)]
    return out


def _check(args) -> dict:
    """Validate every service's settings before starting anything; {service: Config}."""
    configs = {}
    for service in SERVICES:
        probe = argparse.Namespace(**vars(args))
        probe.port = probe.metrics_port = 0
        for d in DEPENDENCIES:
            setattr(probe, f"{d}_addr", "127.0.0.1:1")  # known once they run
        configs[service] = config.load(service, probe)
    return configs


def _health_security(configs: dict):
    """How the launcher asks its services' health: every service serves the same TLS files, so
    the evaluator's settings (it also takes --tls-ca, the CA of the servers it calls) say it."""
    c = configs["evaluator"]
    return own_security(c.tls_cert, c.tls_key, c.tls_ca, c.tls_client_ca)


def _one_identity(args, configs: dict):
    """Every service here serves the same certificate, so the evaluator calls the others under its
    name: unless --allowed-callers says otherwise, that name is what they admit."""
    c = configs["evaluator"]
    if c.tls_cert and c.tls_ca and configs[DEPENDENCIES[0]].tls_client_ca and not args.allowed_callers \
            and not os.environ.get("THEVAL_ALLOWED_CALLERS"):
        name = certificate_name(c.tls_cert)
        if name:
            args.allowed_callers = name
            print(f"theval mesh: every service serves {c.tls_cert}, so its services admit callers whose certificate "
                  f"names {name!r}; give each service its own certificate to tell them apart (docs/security.md)",
                  flush=True)


def _interrupt(*_):
    raise KeyboardInterrupt


def _echo(service, line):
    print(f"[{service}] {line}", flush=True)


def _start_triton(args, procs: dict, configs: dict):
    """A Triton server on free ports, its log beside the others' output; the quality, audio and
    head-pose services then take --backend triton --triton-url (they wait for it to answer). With
    the services' mutual TLS, Triton serves the same certificate behind its front, which admits
    the name the services present (the certificate they all serve)."""
    from theval_mesh.rpc.triton.repository import default_repository
    from theval_mesh.rpc.triton.server import TritonServer
    c = configs[ON_TRITON[0]]
    tls, callers = None, ()
    if c.tls_cert and c.tls_client_ca and c.tls_ca:  # the services dial it as they dial each other
        tls, callers = (c.tls_cert, c.tls_key, c.tls_client_ca), (certificate_name(c.tls_cert),)
    log_path = new_private_folder("theval-mesh-triton-") / "triton.log"
    print(f"theval mesh: starting Triton (its log: {log_path})", flush=True)
    procs["triton"] = TritonServer(default_repository(), weights_store=args.weights_store, log=open_log(log_path),
                                   tls=tls, allowed_callers=callers).spawn()
    args.backend, args.triton_url = "triton", procs["triton"].address


def run(args) -> int:
    if args.triton:
        args.backend, args.triton_url = "triton", "127.0.0.1:1"  # for the check: known once it runs
    if args.port is None:
        args.port = int(os.environ.get("THEVAL_PORT") or EVALUATOR_PORT)
    if args.metrics_port is None:
        args.metrics_port = int(os.environ.get("THEVAL_METRICS_PORT") or EVALUATOR_METRICS_PORT)
    configs = _check(args)
    security = _health_security(configs)
    _one_identity(args, configs)
    signal.signal(signal.SIGTERM, _interrupt)
    procs: dict[str, ServiceProcess] = {}
    stopping = threading.Event()
    try:
        if args.triton:
            _start_triton(args, procs, configs)
        for d in LEAVES:  # started together: each takes seconds to import its models
            procs[d] = ServiceProcess(d, _flags(args, d), echo=_echo, security=security).spawn(0, 0)
        for d in LEAVES:
            procs[d].wait_listening()
        deps = [f for d in DEPENDENCIES for f in (f"--{d}-addr", procs[d].address)]
        procs["evaluator"] = ServiceProcess("evaluator", _flags(args, "evaluator") + deps, echo=_echo,
                                            security=security).start(args.port, args.metrics_port)
        print("theval mesh: waiting for the models to load ...", flush=True)
        for p in procs.values():
            p.wait_for("SERVING", timeout=600)
        print("theval mesh is up:")
        for name in STOP_ORDER + ("triton",):
            if name in procs:
                p = procs[name]
                print(f"  {name:<10} {p.address:<22} metrics {p.metrics_url}")
        print(f"Evaluate at {procs['evaluator'].address} (theval.v1.EvaluatorService). Ctrl-C stops the mesh.",
              flush=True)
        _supervise(procs, stopping)
    except KeyboardInterrupt:
        print("\ntheval mesh: stopping ...", file=sys.stderr, flush=True)
    except RuntimeError as err:
        raise UserError(f"the mesh could not start: {err}") from None
    finally:
        stopping.set()
        codes = stop_all(list(procs.values()), first=("evaluator",))
    if any(c not in (0, None) for c in codes.values()):
        print("theval mesh: stopped; exit codes " + ", ".join(f"{k} {v}" for k, v in codes.items()),
              file=sys.stderr)
        return EXIT_ERROR
    print("theval mesh: stopped", file=sys.stderr)
    return 0


def _supervise(procs: dict, stopping: threading.Event):
    """A service that dies is started again on the same ports."""
    while not stopping.wait(0.5):
        for name, p in procs.items():
            if not p.alive():
                print(f"theval mesh: {name} exited with code {p.proc.returncode}; restarting it on "
                      f"{p.address}", file=sys.stderr, flush=True)
                time.sleep(1.0)
                p.start()
