"""monitoring/: the rules pass `promtool check rules` and their unit tests (`promtool test rules`);
every metric the rules and the dashboard use is one the code exports; the dashboard is a
well-formed Grafana dashboard covering throughput, latency per stage, errors, queue depth and
job progress; `theval mesh prometheus-config` writes what Prometheus loads."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.metric_names import exported_series, metric_names
from theval_mesh.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "monitoring"
RULES = yaml.safe_load((MONITORING / "rules.yml").read_text())
DASHBOARD = json.loads((MONITORING / "dashboard.json").read_text())


def promtool(*args):
    binary = shutil.which("promtool")
    assert binary, "Debian's prometheus package (promtool) is missing: ./dev test installs it"
    return subprocess.run([binary, *args], capture_output=True, text=True, cwd=MONITORING)


@pytest.mark.promtool
def test_promtool_checks_the_rules():
    done = promtool("check", "rules", "rules.yml")
    assert done.returncode == 0 and "SUCCESS: 10 rules found" in done.stdout, done.stdout + done.stderr


@pytest.mark.promtool
def test_the_rules_unit_tests_pass():
    done = promtool("test", "rules", "rules.test.yml")
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def rule_exprs():
    return [r["expr"] for g in RULES["groups"] for r in g["rules"]]


def dashboard_exprs():
    return [t["expr"] for p in DASHBOARD["panels"] for t in p.get("targets", [])]


def test_every_metric_used_is_exported(tmp_path):
    exported = exported_series(tmp_path)
    assert {"theval_grpc_requests_total", "theval_compute_seconds_bucket", "theval_job_progress_videos",
            "theval_jobs"} <= exported
    recorded = {r["record"] for g in RULES["groups"] for r in g["rules"] if "record" in r}
    for expr in rule_exprs() + dashboard_exprs():
        unknown = metric_names(expr) - exported - recorded - {"up"}
        assert not unknown, (expr, unknown)


def test_every_alert_says_what_and_how_bad():
    alerts = [r for g in RULES["groups"] for r in g["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} == {"TheValServiceDown", "TheValDependencyNotServing", "TheValHighErrorRatio",
                                           "TheValSlowCalls", "TheValJobStalled"}
    for a in alerts:
        assert a["labels"]["severity"] in ("critical", "warning")
        assert a["annotations"]["summary"] and a["annotations"]["description"]


def test_the_dashboard_is_well_formed_and_covers_the_mesh():
    assert DASHBOARD["schemaVersion"] >= 36 and DASHBOARD["uid"] and DASHBOARD["title"]
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = DASHBOARD["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        assert p["title"] and set(p["gridPos"]) == {"h", "w", "x", "y"}
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"]
            assert all(t["expr"] and t["refId"] for t in p["targets"])
    used = set().union(*(metric_names(e) for e in dashboard_exprs()))
    for topic, metric in (("throughput", "theval_videos_scored_total"),
                          ("latency per stage", "theval_compute_seconds_bucket"),
                          ("errors", "theval:grpc_error_ratio:rate5m"), ("queue depth", "theval_evaluator_queue_depth"),
                          ("job progress", "theval_job_progress_videos")):
        assert metric in used, topic
    rows = [p["title"] for p in panels if p["type"] == "row"]
    assert rows == ["Throughput", "Latency", "Errors", "Queue depth", "Job progress"]


@pytest.mark.promtool
def test_prometheus_config_command_writes_a_config_promtool_accepts(tmp_path, capsys):
    assert main(["mesh", "prometheus-config", "--target", "evaluator=127.0.0.1:9464", "--target",
                 "landmarks=127.0.0.1:9465", "--rules", str(MONITORING / "rules.yml")]) == 0
    config = tmp_path / "prometheus.yml"
    config.write_text(capsys.readouterr().out)
    loaded = yaml.safe_load(config.read_text())
    job = loaded["scrape_configs"][0]
    assert job["job_name"] == "theval"
    assert {c["labels"]["service"]: c["targets"] for c in job["static_configs"]} == {
        "evaluator": ["127.0.0.1:9464"], "landmarks": ["127.0.0.1:9465"]}
    done = promtool("check", "config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_bad_target_is_a_clear_error(capsys):
    assert main(["mesh", "prometheus-config", "--target", "evaluator"]) != 0
    assert "SERVICE=HOST:PORT" in capsys.readouterr().err


@pytest.mark.parametrize("expr,names", [('sum by (service) (rate(theval_grpc_requests_total{code="OK"}[5m]))',
                                         {"theval_grpc_requests_total"}),
                                        ("theval:grpc_error_ratio:rate5m > 0.05", {"theval:grpc_error_ratio:rate5m"})])
def test_the_name_reader_reads_names(expr, names):
    assert metric_names(expr) == names
