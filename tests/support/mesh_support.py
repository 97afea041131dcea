"""Real mesh servers for the integration tests: `theval serve` child processes on loopback
ports (chosen by the OS), found by their health, never by sleeping."""
from pathlib import Path

import prometheus_client.parser

from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.rpc.launcher import ServiceProcess, free_port, stop_all  # noqa: F401 - free_port for the tests
from theval_mesh.rpc.security import client_channel
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc


class Mesh:
    """The four services and the evaluator; each one's stderr goes to <tmp>/<service>.log."""

    def __init__(self, tmp: Path, roots, quality: str = "proxy", evaluator_args=(), service_args=None,
                 ports=None, security=None, store=None, env=None):
        self.tmp, self.roots = Path(tmp), [str(r) for r in roots]
        self.quality = quality
        self.evaluator_args = list(evaluator_args)
        self.service_args = service_args or {}
        self.ports = ports or {}
        self.security = security or {}  # service -> ClientSecurity of the test's own calls to it
        self.store = store or str(self.tmp / "store.sqlite")  # the evaluator's: a file or a postgresql:// URL
        self.env = env or {}  # added to every server's environment
        self.procs: dict[str, ServiceProcess] = {}
        self.channel = None

    def _args(self, service):
        args = [a for r in self.roots for a in ("--allow-root", r)]  # headpose: for EstimateVideo (FaceXFormer)
        if service in ("quality", "evaluator"):
            args += ["--quality", self.quality]
        return args + list(self.service_args.get(service, ()))

    def _proc(self, service, extra=()):
        log = open(self.tmp / f"{service}.log", "a")
        return ServiceProcess(service, self._args(service) + list(extra), env=self.env, stderr=log,
                              security=self.security.get(service))

    def start_dependencies(self):
        for d in DEPENDENCIES:
            self.procs[d] = self._proc(d).spawn(self.ports.get(d, 0), 0)
        for d in DEPENDENCIES:
            self.procs[d].wait_listening()
        return self

    def dependency_address(self, d) -> str:
        return self.procs[d].address if d in self.procs else f"127.0.0.1:{self.ports[d]}"

    def start_evaluator(self, wait=True):
        deps = [a for d in DEPENDENCIES for a in (f"--{d}-addr", self.dependency_address(d))]
        extra = ["--store", self.store] + deps + self.evaluator_args
        self.procs["evaluator"] = self._proc("evaluator", extra).start(self.ports.get("evaluator", 0), 0)
        self.channel = client_channel(self.procs["evaluator"].address, self.security.get("evaluator"),
                                      options=[("grpc.max_send_message_length", 1 << 30)])
        if wait:
            self.wait_serving()
        return self

    def start(self):
        return self.start_dependencies().start_evaluator()

    def wait_serving(self, timeout=120):
        for p in self.procs.values():
            p.wait_for("SERVING", timeout)

    @property
    def evaluator(self):
        return evaluator_pb2_grpc.EvaluatorServiceStub(self.channel)

    def evaluate(self, uri=None, content=None, timeout=120, **kw):
        ref = common_pb2.VideoRef(uri=str(uri)) if uri is not None else common_pb2.VideoRef(content=content)
        return self.evaluator.Evaluate(evaluator_pb2.EvaluateRequest(video=ref, **kw), timeout=timeout)

    def stop(self):
        if self.channel is not None:
            self.channel.close()
        stop_all(list(self.procs.values()), first=("evaluator",), timeout=30)


def scrape(metrics_url: str) -> dict:
    """{(sample name, frozenset(labels)): value} of one /metrics endpoint, parsed with
    prometheus_client's own parser."""
    import urllib.request
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    out = {}
    for family in prometheus_client.parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_in_flight(process: ServiceProcess, method: str, timeout: float = 30):
    """Wait until `process` is serving a call of `method` (its in-flight gauge)."""
    import time
    end = time.monotonic() + timeout
    labels = dict(service=process.service, method=method)
    while sample(scrape(process.metrics_url), "theval_grpc_in_flight_requests", **labels) < 1:
        assert time.monotonic() < end, f"no {method} call in flight on {process.service}"
        time.sleep(0.02)


def _status_mib(pid: int, key: str) -> float:
    return int(next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if line.startswith(key + ":")).split()[1]) / 1024


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory (VmHWM), MiB."""
    return _status_mib(pid, "VmHWM")


def rss_mib(pid: int) -> float:
    """The process's resident memory now (VmRSS), MiB."""
    return _status_mib(pid, "VmRSS")


def reset_peak_rss(pid: int):
    """Its peak becomes its present resident memory (Linux >= 4.0: clear_refs 5), so that what
    follows is measured on its own."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def results_differences(a_path, b_path, ignore=("seconds",)) -> list:
    """Rows of two results.csv files that differ: [(row, {column: (a, b)})], and a row count that
    differs as [("rows", (len a, len b))]. Every column but `ignore` (wall time) must match."""
    import csv

    def rows(path):
        with open(path) as f:
            return [{k: v for k, v in r.items() if k not in ignore} for r in csv.DictReader(f)]
    a, b = rows(a_path), rows(b_path)
    if len(a) != len(b):
        return [("rows", (len(a), len(b)))]
    return [(i, {k: (x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)})
            for i, (x, y) in enumerate(zip(a, b)) if x != y]
