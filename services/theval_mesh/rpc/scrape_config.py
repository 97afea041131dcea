"""A Prometheus configuration for a mesh: every server's /metrics under job="theval" with a
`service` label, which monitoring/rules.yml and monitoring/dashboard.json rely on. Pure: the
caller writes the text (JSON, which Prometheus reads as the YAML it is a subset of)."""
import json

JOB = "theval"


def prometheus_config(targets: dict, interval_s: float = 15.0, rule_files=()) -> dict:
    """`targets`: {service name: "HOST:METRICS_PORT"}."""
    return {
        "global": {"scrape_interval": f"{interval_s:g}s", "evaluation_interval": f"{interval_s:g}s"},
        "rule_files": [str(f) for f in rule_files],
        "scrape_configs": [{
            "job_name": JOB,
            "metrics_path": "/metrics",
            "static_configs": [{"targets": [address], "labels": {"service": service}}
                               for service, address in sorted(targets.items())],
        }],
    }


def prometheus_config_text(targets: dict, interval_s: float = 15.0, rule_files=()) -> str:
    return json.dumps(prometheus_config(targets, interval_s, rule_files), indent=2) + "\n"
