"""The metric names the code exports, and the names a PromQL expression uses: what the rules, the
dashboard and the autoscaling queries are checked against."""
import re

import prometheus_client

import theval_mesh.rpc.telemetry  # noqa: F401 - registers the servers' metrics
from theval_mesh.jobs.job_telemetry import _JobsCollector
from theval_mesh.stores.job_store import SqlJobStore

PROMQL_WORDS = {"sum", "by", "rate", "histogram_quantile", "or", "and", "on", "offset", "le", "up", "without",
                "increase", "changes", "avg_over_time"}


def exported_series(tmp_path) -> set:
    """Every series name the code exposes (counters' _total, histograms' _bucket/_sum/_count),
    read from prometheus_client's registry and the job collector over a real job store."""
    families = list(prometheus_client.REGISTRY.collect())
    families += list(_JobsCollector(SqlJobStore(str(tmp_path / "jobs.sqlite")), per_job=False).collect())
    names = set()
    for f in families:
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(f.type, ("",))
        names |= {f.name + s for s in suffixes}
    return {n for n in names if n.startswith("theval_")}


def metric_names(expr: str) -> set:
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b\d+(ms|[smhdwy])\b", " ", expr)  # durations (offset 15m)
    expr = re.sub(r"\b(by|on|without|ignoring)\s*\([^)]*\)", " ", expr)  # label lists
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if w not in PROMQL_WORDS and not w.isdigit()}


