"""Settings of a mesh server: one object from flags and THEVAL_* environment variables.

A flag wins over its environment variable, which wins over the default. Everything is checked
at start-up; a missing required setting stops the server with a message naming the flag and
the variable. Every option is declared once, in OPTIONS; the run settings and size limits come
from their table in pure.settings.
"""
import argparse
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.inference import DEVICE_HELP, PRECISIONS, RUNTIMES, InferenceOptions
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.services import BY_NAME, DEPENDENCIES, SERVICES, TABLE
from theval_mesh.pure.settings import LIMIT_SETTINGS, SETTINGS, RunSettings, Setting
from theval_mesh.pure.store_location import is_server
from theval_mesh.pure.user_names import check_name
from theval_mesh.rpc.security import ClientSecurity, Tokens, is_loopback, is_wildcard

# Which services take an option, from their rows in the service table (pure/services.py).
READS_VIDEOS = tuple(s.name for s in TABLE if s.reads_videos)  # their size limits apply
NEEDS_ROOTS = tuple(s.name for s in TABLE if s.roots_required)
ON_TRITON = tuple(s.name for s in TABLE if s.on_triton)  # services whose models can run on Triton
WEIGHTS = tuple(s.name for s in TABLE if s.weights)  # services that load weights from the store
BACKENDS = ("inprocess", "triton")
MIB = 1024 ** 2

# What a value must be: (test, what the error says).
PORT = (lambda p: 0 <= p <= 65535, "must be a port number 0-65535 (0: any free port)")
AT_LEAST_1 = (lambda x: x >= 1, "must be at least 1")
POSITIVE = (lambda x: x > 0, "must be more than 0")
NOT_NEGATIVE = (lambda x: x >= 0, "must not be negative")
MESSAGE = (lambda x: 1 <= x < 2 ** 31, "must be at least 1 and under 2 GiB (gRPC's limit)")


@dataclass(frozen=True)
class Option:
    dest: str
    env: str
    help: str
    kind: type = str          # str, int, float, bool, list (list: repeatable flag, os.pathsep in env)
    default: object = None
    services: tuple = SERVICES  # which services take it
    required: tuple = ()        # for which services it must be set
    choices: tuple | None = None
    run_setting: bool = False   # a request that leaves it unset gets this value
    valid: tuple | None = None  # (test, what): a value set that fails the test is refused

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")


# Which services take a setting of pure.settings: a run setting the evaluator and the services that
# load their models by it at start-up (the table's `settings`); a size limit every service that reads
# videos (the head-pose service's largest Estimate request is the landmarks of the longest video: the
# duration limit bounds it).
SETTING_SERVICES = {**{s.name: tuple(r.name for r in TABLE if s.name in r.settings) + ("evaluator",)
                       for s in SETTINGS},
                    **{s.name: READS_VIDEOS for s in LIMIT_SETTINGS}}
RUN_SETTINGS_HELP = ("what a request that leaves a setting unset gets (the quality service loads the models of "
                     "its profile and quality mode at start-up, the head-pose service its estimator)")


# The bounds of the pure.settings rows that have some (RunSettings and Limits check them too).
SETTING_BOUNDS = {"max_side_px": AT_LEAST_1, "frame_stride": AT_LEAST_1, "max_duration_s": POSITIVE}


def _from_setting(s: Setting, run_setting: bool) -> Option:
    return Option(s.name, s.env, s.help, s.kind, s.default, SETTING_SERVICES[s.name], choices=s.choices,
                  run_setting=run_setting, valid=SETTING_BOUNDS.get(s.name))


OPTIONS = (
    Option("host", "THEVAL_HOST", "address to listen on (default 127.0.0.1: loopback only)",
           default="127.0.0.1"),
    Option("port", "THEVAL_PORT", "gRPC port (0: any free port, printed at start-up)", int,
           required=SERVICES, valid=PORT),
    Option("metrics_port", "THEVAL_METRICS_PORT", "Prometheus /metrics HTTP port (0: any free port)", int,
           required=SERVICES, valid=PORT),
    Option("allow_root", "THEVAL_ALLOWED_ROOTS",
           f"a folder whose videos may be read by URI (repeatable; env: folders joined by '{os.pathsep}')",
           list, services=READS_VIDEOS, required=NEEDS_ROOTS),
    Option("max_video_bytes", "THEVAL_MAX_VIDEO_BYTES", "largest video accepted as bytes (default 64 MiB)",
           int, 64 * MIB, services=READS_VIDEOS, valid=AT_LEAST_1),
    Option("max_message_bytes", "THEVAL_MAX_MESSAGE_BYTES",
           "largest message between services: video bytes plus landmark arrays (default 1 GiB)",
           int, 1024 * MIB, valid=MESSAGE),
    *(_from_setting(s, run_setting=False) for s in LIMIT_SETTINGS),
    # TLS on the gRPC port; beyond loopback it is required, with authentication (rpc.security).
    Option("tls_cert", "THEVAL_TLS_CERT", "PEM certificate (chain) of this server: serve TLS"),
    Option("tls_key", "THEVAL_TLS_KEY", "PEM private key of --tls-cert"),
    Option("tls_client_ca", "THEVAL_TLS_CLIENT_CA",
           "PEM CA certificate: callers must present a certificate it signed (mutual TLS)"),
    Option("allowed_callers", "THEVAL_ALLOWED_CALLERS",
           "under mutual TLS, the certificate names (common names) that may call this service, separated by commas "
           "(default: the evaluator's, `evaluator`)", services=DEPENDENCIES),
    Option("workers", "THEVAL_WORKERS", "gRPC worker threads: calls served at once, more are refused with "
           "RESOURCE_EXHAUSTED (default 8)", int, 8, valid=AT_LEAST_1),
    Option("stream_limit", "THEVAL_STREAM_LIMIT", "streaming calls (EvaluateStream, StreamJob) open at once, "
           "within --workers (default: half the workers)", int, services=("evaluator",)),
    Option("stream_limit_per_caller", "THEVAL_STREAM_LIMIT_PER_CALLER", "streaming calls one caller (a token's "
           "identity) may hold open at once, within --stream-limit (default: half of it, at least 1; without tokens "
           "there is one caller, limited by --stream-limit alone)", int, services=("evaluator",)),
    Option("stream_idle_s", "THEVAL_STREAM_IDLE_S", "an EvaluateStream that sent no request for this long, with "
           "none of its videos being scored, is ended (default 60 s)", float, 60.0, services=("evaluator",),
           valid=POSITIVE),
    Option("stream_max_s", "THEVAL_STREAM_MAX_S", "longest a streaming call stays open (default 3600 s)", float,
           3600.0, services=("evaluator",), valid=POSITIVE),
    Option("grace_s", "THEVAL_GRACE_S", "on SIGTERM, time in-flight calls get to finish (default 30 s)",
           float, 30.0, valid=NOT_NEGATIVE),
    *(_from_setting(s, run_setting=True) for s in SETTINGS),
    Option("weights_store", "THEVAL_WEIGHTS", "model weights folder (quality models; FaceXFormer and retina-face "
           "for the head-pose service)", services=WEIGHTS),
    # How the networks of this process run (backends.inference.plan): its runtime, device, precision.
    Option("runtime", "THEVAL_RUNTIME", "inference runtime of the networks: auto (default: the fastest measured "
           "on the device), torch, onnxruntime, openvino", default="auto", choices=RUNTIMES, services=WEIGHTS),
    Option("device", "THEVAL_DEVICE", f"device of the networks and face detectors: {DEVICE_HELP}",
           default="auto", services=WEIGHTS),
    Option("precision", "THEVAL_PRECISION", "fp32 (default), or fp16/bf16 on torch (other numbers, labelled; "
           "never mixed with fp32 results)", default="fp32", choices=PRECISIONS, services=WEIGHTS),
    # Where the neural models run: in this process, or on a Triton server (triton_models/).
    Option("backend", "THEVAL_BACKEND", "where the models run: inprocess (default) or triton",
           default="inprocess", choices=BACKENDS, services=ON_TRITON),
    Option("triton_url", "THEVAL_TRITON_URL", "HOST:PORT of Triton's gRPC endpoint (with --backend triton)",
           services=ON_TRITON),
    Option("tls_ca", "THEVAL_TLS_CA", "PEM CA certificate of the servers this one calls (the evaluator: its "
           "services; quality, audio and headpose: Triton): reach them over TLS, presenting --tls-cert/--tls-key when "
           "they require client certificates", services=("evaluator",) + ON_TRITON),
    # The evaluator
    Option("store", "THEVAL_STORE", "the store of GT reference sets, scored videos and submitted jobs: a SQLite "
           "file (created if absent; one evaluator), or a postgresql:// URL (evaluators on several pods; the "
           "password in PGPASSWORD or a PGPASSFILE)",
           services=("evaluator",), required=("evaluator",)),
    *(Option(f"{d}_addr", f"THEVAL_{d.upper()}_ADDR", f"HOST:PORT of the {d} service",
             services=("evaluator",), required=("evaluator",)) for d in DEPENDENCIES),
    Option("tokens_file", "THEVAL_TOKENS_FILE",
           "bearer tokens accepted on the API, one 'IDENTITY TOKEN' per line, mode 600 (env THEVAL_TOKENS may hold "
           "the lines instead); required beyond loopback", services=("evaluator",)),
    Option("admins", "THEVAL_ADMINS", "identities of the tokens that may list and read every owner's GT "
           "reference sets, separated by commas (e.g. ops,audit); others see their own only",
           services=("evaluator",)),

    Option("call_timeout_s", "THEVAL_CALL_TIMEOUT_S",
           "deadline of each call to a service, within the caller's own (default 600 s)", float, 600.0,
           services=("evaluator",), valid=POSITIVE),
    Option("retries", "THEVAL_RETRIES", "retries of a call that found its service UNAVAILABLE (default 3)",
           int, 3, services=("evaluator",), valid=NOT_NEGATIVE),
    Option("memory_budget_mb", "THEVAL_MEMORY_BUDGET_MB", "memory for the calls served at once: each reserves "
           "what its video's header says it takes before the work starts, and waits while others hold it "
           "(default 0: the evaluator, half of --memory-limit-mb; a leaf, 85 percent of it less what its loaded models "
           "hold)", int, 0, valid=NOT_NEGATIVE),
    Option("memory_limit_mb", "THEVAL_MEMORY_LIMIT_MB", "memory the process may use, that the default "
           "--memory-budget-mb is sized from (default 0: its cgroup's limit, else the machine's memory)", int, 0,
           valid=NOT_NEGATIVE),
    Option("concurrency", "THEVAL_CONCURRENCY",
           "videos of one EvaluateStream or CreateReference scored at once (default 2)", int, 2,
           services=("evaluator",), valid=AT_LEAST_1),
    Option("job_workers", "THEVAL_JOB_WORKERS", "Ray workers of a submitted job unless it says (default 2)",
           int, 2, services=("evaluator",), valid=AT_LEAST_1),
    Option("max_job_workers", "THEVAL_MAX_JOB_WORKERS", "most Ray workers a submitted job may ask for (default 4)",
           int, 4, services=("evaluator",), valid=AT_LEAST_1),
    Option("max_jobs", "THEVAL_MAX_JOBS", "submitted jobs running at once (default 2)", int, 2,
           services=("evaluator",), valid=AT_LEAST_1),
    Option("ray_address", "THEVAL_RAY_ADDRESS",
           "the Ray cluster that runs submitted jobs: HOST:PORT of its GCS (a driver on one of its machines) or "
           "ray://HOST:PORT of its Ray Client server (default: each job's driver starts a local Ray)",
           services=("evaluator",)),
    Option("advertise_host", "THEVAL_ADVERTISE_HOST",
           "the address of this evaluator that its jobs' Ray workers dial (default: --host; 127.0.0.1 when that is "
           "0.0.0.0, which a --ray-address cluster on other machines cannot reach: set it then)",
           services=("evaluator",)),
    Option("advertise_tls_name", "THEVAL_ADVERTISE_TLS_NAME",
           "the name in this evaluator's certificate that its jobs' workers check when --advertise-host is not in it "
           "(e.g. a pod IP: the Service's name)", services=("evaluator",)),
)


@dataclass(frozen=True)
class Config:
    service: str
    host: str
    port: int
    metrics_port: int
    allowed_roots: tuple = ()
    max_video_bytes: int = 64 * MIB
    max_message_bytes: int = 1024 * MIB
    limits: Limits = field(default_factory=Limits)
    workers: int = 8
    stream_limit: int | None = None  # None: half the workers
    stream_limit_per_caller: int | None = None  # None: half the stream limit
    stream_idle_s: float = 60.0
    stream_max_s: float = 3600.0
    grace_s: float = 30.0
    run: RunSettings = field(default_factory=RunSettings)
    weights_store: str | None = None
    inference: InferenceOptions = field(default_factory=InferenceOptions)
    backend: str = "inprocess"
    triton_url: str | None = None
    store: str | None = None
    dependencies: dict = field(default_factory=dict)  # service name -> HOST:PORT
    call_timeout_s: float = 600.0
    retries: int = 3
    memory_budget_mb: int = 0  # 0: rpc.memory_budget.default_budget() / leaf_budget()
    memory_limit_mb: int = 0  # 0: rpc.memory_budget.memory_limit()
    concurrency: int = 2
    job_workers: int = 2
    max_job_workers: int = 4
    max_jobs: int = 2
    ray_address: str | None = None
    advertise_host: str | None = None
    advertise_tls_name: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    tls_ca: str | None = None
    allowed_callers: frozenset = frozenset()  # certificate names that may call (mutual TLS); empty: any
    tokens: Tokens = field(default_factory=lambda: Tokens([]))
    admins: frozenset = frozenset()  # identities that may read every owner's reference sets

    @property
    def streams(self) -> int:
        """Streaming calls served at once: they hold a worker each, for long."""
        return self.stream_limit or max(1, self.workers // 2)

    @property
    def caller_streams(self) -> int:
        """Streaming calls one caller (a token's identity) may hold: never all of them, if more than one."""
        return self.stream_limit_per_caller or max(1, self.streams // 2)

    def client_security(self, token: str | None = None) -> ClientSecurity:
        """How this server reaches the services it calls."""
        return ClientSecurity(self.tls_ca, self.tls_cert if self.tls_ca else None,
                              self.tls_key if self.tls_ca else None, token)


CONFIG_FIELDS = {f.name for f in fields(Config)}


def add_options(parser: argparse.ArgumentParser, services=SERVICES):
    """Flags for the options any of `services` takes. Defaults stay None so that load() can tell
    a flag from an environment variable."""
    run_settings = None
    for o in OPTIONS:
        if not set(o.services) & set(services):
            continue
        target = parser
        if o.run_setting:
            run_settings = target = run_settings or parser.add_argument_group("run settings", RUN_SETTINGS_HELP)
        shown = "" if o.default in (None, False) or "default" in o.help else f" (default {o.default})"
        text = f"{o.help}{shown} [env {o.env}]"
        if o.kind is bool:
            target.add_argument(o.flag, dest=o.dest, action="store_const", const=True, help=text)
        elif o.kind is list:
            target.add_argument(o.flag, dest=o.dest, action="append", metavar="DIR", help=text)
        else:
            unit = o.dest.split("_")[-1].upper()
            metavar = None if o.choices else unit if unit in ("PORT", "BYTES", "PX", "S", "ADDR") else \
                "N" if o.kind is int else {"store": "FILE|URL", "weights_store": "DIR"}.get(o.dest, unit)
            target.add_argument(o.flag, dest=o.dest, type=o.kind, choices=o.choices, metavar=metavar, help=text)


def _value(o: Option, args, environ):
    given = getattr(args, o.dest, None)
    if given is not None:
        return given, o.flag
    text = environ.get(o.env)
    if text is None or text == "":
        return o.default, None
    try:
        if o.kind is bool:
            if text.lower() not in ("1", "true", "yes", "0", "false", "no"):
                raise ValueError
            return text.lower() in ("1", "true", "yes"), o.env
        if o.kind is list:
            return [p for p in text.split(os.pathsep) if p], o.env
        value = o.kind(text)
    except ValueError:
        raise UserError(f"{o.env}={text!r} is not a valid {o.kind.__name__}: {o.help}") from None
    if o.choices and value not in o.choices:
        raise UserError(f"{o.env}={text!r}: use one of {', '.join(o.choices)}")
    return value, o.env


def load(service: str, args=None, environ=None) -> Config:
    """The checked Config of `service` from parsed flags and the environment."""
    if service not in SERVICES:
        raise UserError(f"unknown service {service!r}: use one of {', '.join(SERVICES)}")
    args = args if args is not None else argparse.Namespace()
    environ = os.environ if environ is None else environ
    v, origin = {}, {}
    for o in OPTIONS:
        if service not in o.services:
            continue
        v[o.dest], origin[o.dest] = _value(o, args, environ)
        if service in o.required and v[o.dest] in (None, []):
            raise UserError(f"missing required setting {o.flag} (or {o.env}) for the {service} "
                            f"service: {o.help}")

    def where(dest):
        o = next(o for o in OPTIONS if o.dest == dest)
        return origin.get(dest) or f"{o.flag} (or {o.env})"

    def check(dest, ok, what):
        if dest in v and v[dest] is not None and not ok(v[dest]):
            raise UserError(f"{where(dest)}={v[dest]!r}: {what}")

    for o in OPTIONS:
        if o.valid:
            check(o.dest, *o.valid)
    check("stream_limit", lambda x: 1 <= x <= v["workers"], f"must be 1 to --workers ({v['workers']})")
    if "max_video_bytes" in v and v["max_video_bytes"] + MIB > v["max_message_bytes"]:
        raise UserError(f"{where('max_video_bytes')}={v['max_video_bytes']} must be at least 1 MiB under "
                        f"{where('max_message_bytes')}={v['max_message_bytes']}")

    roots = []
    for root in v.get("allow_root") or []:
        p = Path(root).expanduser()
        if not p.is_dir():
            raise UserError(f"{where('allow_root')}: allowed root {root!r} is not an existing folder")
        roots.append(os.path.realpath(p))

    def check_address(dest):
        host, _, port = v[dest].rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"{where(dest)}={v[dest]!r}: expected HOST:PORT, e.g. 127.0.0.1:50052")
        return v[dest]

    deps = {d: check_address(f"{d}_addr") for d in (DEPENDENCIES if service == "evaluator" else ())}
    if v.get("backend") == "triton":
        if not v.get("triton_url"):
            raise UserError(f"{where('backend')}=triton needs --triton-url (or THEVAL_TRITON_URL): "
                            "HOST:PORT of Triton's gRPC endpoint (`theval triton up` prints it)")
        check_address("triton_url")

    tokens = Tokens.load(v.get("tokens_file"), environ) if service == "evaluator" else Tokens([])
    _check_security(service, v, tokens, where)
    admins = _admins(v.get("admins"), tokens, where)
    if v.get("ray_address") and is_wildcard(v["host"]) and not v.get("advertise_host"):
        raise UserError(f"{where('ray_address')}={v['ray_address']!r} runs jobs on a Ray cluster whose workers dial "
                        f"this evaluator, and {where('host')}={v['host']!r} does not say where: set --advertise-host "
                        "(or THEVAL_ADVERTISE_HOST), an address of this machine they reach")
    if v.get("advertise_tls_name") and not v.get("tls_cert"):
        raise UserError(f"{where('advertise_tls_name')} names this server's certificate: it needs TLS (--tls-cert)")
    if "job_workers" in v and v["job_workers"] > v["max_job_workers"]:
        raise UserError(f"{where('job_workers')}={v['job_workers']} is over {where('max_job_workers')}="
                        f"{v['max_job_workers']}")

    store = v.get("store")
    if store is not None and not is_server(store):
        parent = Path(store).expanduser().resolve().parent
        if not parent.is_dir():
            raise UserError(f"{where('store')}={store!r}: folder {parent} does not exist")
        store = str(Path(store).expanduser().resolve())

    try:
        run = RunSettings.from_values(v)
    except ValueError as err:
        raise UserError(str(err)) from None
    inference = InferenceOptions.from_values(v)  # a bad value is refused, naming the flag
    made = dict(service=service, allowed_roots=tuple(roots), run=run, limits=run.limits, store=store,
                dependencies=deps, tokens=tokens, admins=admins, inference=inference,
                allowed_callers=_names(v.get("allowed_callers"), "allowed_callers", where) or frozenset(BY_NAME[service].callers))
    # Every other option whose name is a Config field is that field, as given.
    cfg = Config(**made, **{k: v[k] for k in CONFIG_FIELDS & v.keys() - made.keys()})
    check("stream_limit_per_caller", lambda x: 1 <= x <= cfg.streams,
          f"must be 1 to the stream limit ({cfg.streams})")
    return cfg


def _names(text: str | None, dest: str, where) -> frozenset:
    """The names of a comma-separated list (--admins, --allowed-callers), each a valid name."""
    names = frozenset(filter(None, (a.strip() for a in (text or "").split(","))))
    for name in names:
        check_name(where(dest), name)
    return names


def _admins(text: str | None, tokens: Tokens, where) -> frozenset:
    """The identities of --admins, each one with a token (an admin without one could never call)."""
    admins = _names(text, "admins", where)
    unknown = sorted(admins - tokens.identities)
    if unknown:
        raise UserError(f"{where('admins')}: no token in --tokens-file (or THEVAL_TOKENS) for "
                        f"{', '.join(map(repr, unknown))[:300]}: give each admin a token, or leave it out")
    return admins


def _check_security(service: str, v: dict, tokens: Tokens, where):
    """TLS files come in pairs; nothing beyond loopback runs without TLS and authentication:
    tokens on the evaluator's API, mutual TLS on the services behind it."""
    for dest in ("tls_cert", "tls_key", "tls_client_ca", "tls_ca"):
        if v.get(dest) and not Path(v[dest]).expanduser().is_file():
            raise UserError(f"{where(dest)}={v[dest]!r}: no such file")
    if bool(v.get("tls_cert")) != bool(v.get("tls_key")):
        raise UserError(f"TLS needs both {where('tls_cert')} and {where('tls_key')}")
    if v.get("tls_client_ca") and not v.get("tls_cert"):
        raise UserError(f"{where('tls_client_ca')} (mutual TLS) needs TLS: set --tls-cert and --tls-key")
    if is_loopback(v["host"]):
        return
    missing = [] if v.get("tls_cert") else ["TLS (--tls-cert, --tls-key)"]
    if service == "evaluator" and not tokens:
        missing.append("bearer tokens (--tokens-file or THEVAL_TOKENS)")
    if service != "evaluator" and not v.get("tls_client_ca"):
        missing.append("client certificates (--tls-client-ca: mutual TLS with the evaluator)")
    if missing:
        raise UserError(f"--host {v['host']} listens beyond loopback: that needs {' and '.join(missing)}; "
                        "or listen on 127.0.0.1")

