"""A job's driver as a process of its own (`python -m theval_mesh.jobs.drivers JOB --store FILE|URL`),
started in the background by `theval bulk submit|resume` and by the evaluator's SubmitJob;
`theval bulk run JOB` drives one in the terminal with the same code (drive()).

Its own process, not a thread: Ray's local processes are started with fork(), which is not safe
in a process full of gRPC threads (a child can hang before it runs), and they die with the
thread that started them. The driver outlives the command (or server) that started it, writes
its output to a log beside the job store file (or in the temporary folder), and reports through the store.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from theval_mesh.backends.private_files import open_log, private_folder
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_PARTIAL
from theval_mesh.pure.store_location import is_server


def log_path(store, job_id: str) -> Path:
    """Beside a store file; for a database server, in this user's own folder of this machine's
    temporary folder (mode 700: a log names videos and addresses)."""
    folder = (Path(tempfile.gettempdir()) / f"theval-job-logs-{os.getuid()}" if is_server(store)
              else Path(store).with_suffix(".logs"))
    return folder / f"{job_id}.log"


def start_driver(store_path, job_id: str, workers: int | None = None, ray_address: str | None = None,
                 metrics_port: int | None = None, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    """env: added to this process's environment (e.g. the token its workers call the evaluator with)."""
    log = log_path(store_path, job_id)
    private_folder(log.parent)
    cmd = [sys.executable, "-m", "theval_mesh.jobs.drivers", job_id, "--store", str(store_path)]
    for flag, value in (("--workers", workers), ("--ray-address", ray_address), ("--metrics-port", metrics_port)):
        if value is not None:
            cmd += [flag, str(value)]
    with open_log(log) as out:
        driver = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env={**os.environ, **(env or {})}, start_new_session=True)  # outlives its starter and its terminal
    return driver, log


def last_line(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return lines[-1] if lines else "no output"


def summary(job, store_arg: str | None = None) -> str:
    """A job's state in a few lines, with what to do next (store_arg: the --store it was given)."""
    line = (f"{job.id} {job.state}: {job.total} videos, {job.done} done, {job.failed} failed, "
            f"{job.remaining} remaining")
    if job.error:
        line += f"\n  error: {job.error}"
    if job.state == "interrupted":
        store = f" --store {shlex.quote(store_arg)}" if store_arg else ""
        line += f"\n  resume with: theval bulk resume {job.id}{store}"
    return line


def drive(store, job_id: str, workers: int | None = None, ray_address: str | None = None,
          metrics_port: int | None = None, progress: bool = False, store_arg: str | None = None) -> int:
    """Run the job to its end in this process (on Ray); returns the exit code."""
    # Imported here: the evaluator imports this module to start drivers, not to be one.
    from theval_mesh.jobs import pipeline
    from theval_mesh.jobs.progress import Progress
    job = store.get(job_id)
    if metrics_port is not None:
        from theval_mesh.jobs.job_telemetry import register_jobs
        from theval_mesh.rpc.telemetry import start_http
        register_jobs(store)
        _, port = start_http("127.0.0.1", metrics_port)
        print(f"{job_id}: metrics on http://127.0.0.1:{port}/metrics", flush=True)
    shown = Progress(job, enabled=progress)
    try:
        workers = job.spec.workers if workers is None else replace(job.spec, workers=workers).workers  # checked
        job = pipeline.run_ray(store, job_id, workers, ray_address or job.spec.ray_address, on_result=shown)
    finally:
        shown.close()
    print(summary(job, store_arg), flush=True)
    return EXIT_OK if job.state == "done" and not job.failed else EXIT_PARTIAL if job.state == "done" else EXIT_ERROR


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m theval_mesh.jobs.drivers", description="Drive one job of a job "
                                "store to its end (what `theval bulk submit|resume` start in the background).")
    p.add_argument("id")
    p.add_argument("--store", required=True, metavar="FILE|URL")
    p.add_argument("--workers", type=int, default=None, metavar="N")
    p.add_argument("--ray-address", default=None, metavar="ADDR")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT")
    args = p.parse_args(argv)
    from theval_mesh.stores.job_store import SqlJobStore
    try:
        return drive(SqlJobStore(args.store), args.id, args.workers, args.ray_address, args.metrics_port,
                     progress=sys.stderr.isatty())
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
