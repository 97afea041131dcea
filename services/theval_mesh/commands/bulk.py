"""`theval bulk`: durable, resumable scoring jobs over many videos, on Ray.

submit writes the job (every video, the settings) to the job store and starts its driver in the
background; the driver commits each result as it finishes, so `status` can report from the
store at any time, a crash loses only the videos in flight, and `resume` goes on from there.
"""
import json
import os
import shlex
import sys
import time
from pathlib import Path

from theval_mesh.commands.evaluate import (
    add_log_options,
    add_run_options,
    cache_choice,
    inference_from,
    log_run,
    print_summary,
    settings_from,
)
from theval_mesh.core.inputs import parse_model_arg, plan
from theval_mesh.jobs import pipeline
from theval_mesh.jobs.drivers import drive, last_line, start_driver, summary
from theval_mesh.jobs.progress import resuming, settings_changed
from theval_mesh.outputs.results_files import write_results
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.exit_codes import EXIT_OK, EXIT_PARTIAL
from theval_mesh.pure.store_location import is_server
from theval_mesh.pure.workers import choose_workers, notice
from theval_mesh.stores import result_cache
from theval_mesh.stores.job_store import FINISHED, SqlJobStore

START_TIMEOUT_S = 120.0


def default_store() -> str:
    """$THEVAL_JOBS (a file or a postgresql:// URL), else the job store file in the user's cache."""
    env = os.environ.get("THEVAL_JOBS")
    if env and is_server(env):
        return env
    return str(Path(env).expanduser() if env else Path.home() / ".cache" / "theval" / "jobs.sqlite")


def _store_option(p):
    p.add_argument("--store", default=None, metavar="FILE|URL",
                   help="the job store: a SQLite file, or a postgresql:// URL (default $THEVAL_JOBS or "
                   "~/.cache/theval/jobs.sqlite)")


def _background_options(p):
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="run on this Ray cluster (default: a local Ray, started and stopped by the job's driver)")
    p.add_argument("--wait", action="store_true", help="drive the job in this terminal, with a progress bar")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="the driver serves Prometheus /metrics on this port")


def register(sub):
    p = sub.add_parser("bulk", help="durable, resumable scoring jobs over many videos (Ray)",
                       description="Bulk scoring jobs: submit, then status / results / resume / cancel by job id. "
                                   "Every result is committed to the job store as it finishes.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    s = actions.add_parser("submit", help="start a job; prints its id")
    s.add_argument("--gt", required=True, metavar="DIR", help="GT videos: a folder, a video, or a .txt list")
    s.add_argument("--gt-name", default="GT", help="name of the GT row (default GT)")
    s.add_argument("--model", action="append", default=[], metavar="NAME=DIR", help="a model's videos (repeatable)")
    s.add_argument("--mesh", default=None, metavar="HOST:PORT",
                   help="score through a running mesh's evaluator instead of in-process models")
    _store_option(s)
    _background_options(s)
    add_run_options(s)
    s.set_defaults(func=submit)

    for name, fn, text in (("status", status, "progress of a job: done, failed, remaining, rate, ETA"),
                           ("resume", resume, "continue a job after a crash or a stop"),
                           ("cancel", cancel, "stop a job (its committed results stay)"),
                           ("run", run, "drive a job in this process (what submit and resume start)")):
        a = actions.add_parser(name, help=text)
        a.add_argument("id", help="the job id `submit` printed")
        _store_option(a)
        if name == "status":
            a.add_argument("--json", action="store_true", help="print the job as one JSON object")
        if name in ("resume", "run"):
            _background_options(a)
            a.add_argument("--workers", type=int, default=None, metavar="N", help="Ray workers (default: the job's)")
        a.set_defaults(func=fn)

    r = actions.add_parser("results", help="write a job's results, leaderboard and plot (as `theval evaluate`)")
    r.add_argument("id")
    r.add_argument("--out", required=True, metavar="DIR")
    _store_option(r)
    add_log_options(r)
    r.set_defaults(func=results)

    ls = actions.add_parser("list", help="every job of the store")
    _store_option(ls)
    ls.add_argument("--json", action="store_true", help="print a JSON array of the jobs")
    ls.set_defaults(func=list_jobs)


def open_store(args) -> SqlJobStore:
    if args.store:
        return SqlJobStore(args.store)
    location = default_store()
    if not is_server(location):
        Path(location).parent.mkdir(parents=True, exist_ok=True)
    return SqlJobStore(location)


# ---------------------------------------------------------------------------- submit / resume / run
def submit(args) -> int:
    inputs = [(args.gt_name, args.gt)] + [parse_model_arg(m) for m in args.model]
    items = plan(inputs)
    settings = settings_from(args)
    args.workers, why = choose_workers(args.workers, len(items), os.cpu_count() or 1)  # the driver's too
    line = notice(args.workers, why, len(items))
    if line and not args.quiet:
        print(line, file=sys.stderr)
    spec = pipeline.new_spec(inputs, settings, quiet=args.quiet, items=items, allow_unpaired=args.allow_unpaired,
                             gt_name=args.gt_name,
                             workers=args.workers, weights_store=args.weights_store, mesh=args.mesh,
                             weights=args.weights, ray_address=args.ray_address, partial_score=args.partial_score,
                             cache=result_cache.location(cache_choice(args)), inference=inference_from(args))
    store = open_store(args)
    for line in settings_changed(store.scored_otherwise(items, spec.settings_key()), spec.settings):
        print(line, file=sys.stderr)
    job = store.create(spec, items)
    print(f"{job.id}: {job.total} videos", flush=True)
    return _drive(args, store, job.id)


def resume(args) -> int:
    store = open_store(args)
    job = store.get(args.id)
    why = job.refusal()  # running elsewhere, or cancelled
    if why:
        raise UserError(why)
    if job.state == "done" and not job.failed:
        print(f"{job.id} is done: {job.done} scored; {command(args, 'results', job.id)}")
        return EXIT_OK
    line = resuming(job)  # a done job with failures: they are scored again
    if line:
        print(f"{job.id}: {line}", flush=True)
    return _drive(args, store, job.id)


def command(args, action: str, job_id: str) -> str:
    """A follow-up command to print, as it can be pasted: with the store it was given."""
    store = f" --store {shlex.quote(args.store)}" if getattr(args, "store", None) else ""
    out = f" --out {shlex.quote(f'results-{job_id}')}" if action == "results" else ""
    return f"theval bulk {action} {job_id}{store}{out}"


def _drive(args, store, job_id: str) -> int:
    """Run the driver here (--wait) or start it in the background and wait until it holds the job."""
    if getattr(args, "wait", False):
        return _run_here(store, job_id, args)
    driver, log = start_driver(store.path, job_id, getattr(args, "workers", None), getattr(args, "ray_address", None),
                               getattr(args, "metrics_port", None))
    end = time.monotonic() + START_TIMEOUT_S
    while store.get(job_id).state not in ("running",) + FINISHED:
        if driver.poll() is not None or time.monotonic() > end:
            raise UserError(f"the driver of {job_id} did not start ({last_line(log)}); log: {log}")
        time.sleep(0.2)
    print(f"{job_id}: running in the background (driver pid {driver.pid}, log {log})\n"
          f"  {command(args, 'status', job_id)}    {command(args, 'results', job_id)}")
    return EXIT_OK


def _run_here(store, job_id: str, args) -> int:
    return drive(store, job_id, args.workers, args.ray_address, args.metrics_port,
                 progress=sys.stderr.isatty() or bool(getattr(args, "wait", False)), store_arg=args.store)


def run(args) -> int:
    return _run_here(open_store(args), args.id, args)


# ---------------------------------------------------------------------------- reading a job
def _ago(t: float | None) -> str:
    return "never" if t is None else f"{time.time() - t:.0f} s ago"


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def job_json(job) -> dict:
    """A job as `bulk status --json` and `bulk list --json` print it."""
    return {"id": job.id, "state": job.state, "total": job.total, "done": job.done, "failed": job.failed,
            "remaining": job.remaining, "rate_per_s": job.rate, "eta_s": job.eta_s, "error": job.error,
            "cancel_requested": job.cancel, "driver": job.driver, "heartbeat_unix": job.heartbeat,
            "created_unix": job.created, "started_unix": job.started, "finished_unix": job.finished,
            "inputs": dict(job.spec.inputs), "gt_name": job.spec.gt_name, "settings": job.spec.settings,
            "workers": job.spec.workers, "mesh": job.spec.mesh}


def status(args) -> int:
    job = open_store(args).get(args.id)
    if args.json:
        print(json.dumps(job_json(job), indent=1))
        return EXIT_OK
    print(summary(job, args.store))
    if job.state == "running":
        print(f"  driver {job.driver}, heartbeat {_ago(job.heartbeat)}")
        print(f"  rate {job.rate * 60:.1f} videos/min, ETA {_eta(job.eta_s)}")
    s = job.spec
    print(f"  models: {', '.join(name for name, _ in s.inputs)}; settings: " +
          ", ".join(f"{k}={v}" for k, v in s.settings.items()) + (f"; mesh {s.mesh}" if s.mesh else ""))
    return EXIT_OK


def results(args) -> int:
    store = open_store(args)
    job = store.get(args.id)
    if job.remaining:
        print(f"warning: {job.id} is {job.state}: {job.done + job.failed} of {job.total} video(s) done, "
              f"{job.failed} failed so far, {job.remaining} not scored yet: the results cover the scored ones",
              file=sys.stderr)
    written = write_results(Path(args.out), store, job)
    print_summary(written.board, written.results, written.paths)
    log_run(args, args.out)
    return EXIT_PARTIAL if job.failed or job.remaining else EXIT_OK


def cancel(args) -> int:
    job = open_store(args).request_cancel(args.id)
    print(f"{job.id}: " + ("cancel requested; the driver stops within a few seconds" if job.cancel and
                           job.state == "running" else job.state))
    return EXIT_OK


def list_jobs(args) -> int:
    jobs = open_store(args).jobs()
    if args.json:
        print(json.dumps([job_json(j) for j in jobs], indent=1))
        return EXIT_OK
    if not jobs:
        print("no jobs yet: theval bulk submit --gt DIR --model NAME=DIR ...")
    for job in jobs:
        print(f"{job.id}  {job.state:<11} {job.done + job.failed}/{job.total}  "
              f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(job.created))}  "
              + " ".join(name for name, _ in job.spec.inputs))
    return EXIT_OK
