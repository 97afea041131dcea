"""A job's driver as a process of its own (`theval bulk run JOB`), started in the background by
`theval bulk submit|resume` and by the evaluator's SubmitJob.

Its own process, not a thread: Ray's local processes are started with fork(), which is not safe
in a process full of gRPC threads (a child can hang before it runs), and they die with the
thread that started them. The driver outlives the command (or server) that started it, writes
its output to a log beside the job store, and reports through the store.
"""
import os
import subprocess
import sys
from pathlib import Path


def log_path(store_path, job_id: str) -> Path:
    return Path(store_path).with_suffix(".logs") / f"{job_id}.log"


def start_driver(store_path, job_id: str, workers: int | None = None, ray_address: str | None = None,
                 metrics_port: int | None = None, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    """env: added to this process's environment (e.g. the token its workers call the evaluator with)."""
    log = log_path(store_path, job_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "theval_mesh.commands.cli", "bulk", "run", job_id, "--store", str(store_path)]
    for flag, value in (("--workers", workers), ("--ray-address", ray_address), ("--metrics-port", metrics_port)):
        if value is not None:
            cmd += [flag, str(value)]
    with open(log, "a") as out:
        driver = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env={**os.environ, **(env or {})}, start_new_session=True)  # outlives its starter and its terminal
    return driver, log


def last_line(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return lines[-1] if lines else "no output"
