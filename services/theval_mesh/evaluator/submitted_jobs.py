"""Bulk jobs submitted to the evaluator (SubmitJob, GetJob, StreamJob, CancelJob), in plain
Python values: the servicer (evaluator/servicer.py) converts the messages. Each job has its own
driver process (jobs.drivers), whose Ray workers score through the evaluator's own Evaluate, so a
job's videos go the same path as a client's; each result is committed to the evaluator's store
as it finishes, where GetJob and StreamJob read the progress. A caller sees its own jobs only.

When the evaluator requires tokens, each job gets one of its own, revoked when its driver exits: the
driver hands it to its Ray actors as an argument (jobs.pipeline), which an external cluster keeps in
its GCS, so it opens nothing once the job is over. It is the job's, not a user's: its identity names
the job (rpc.security.job_identity), it calls Evaluate and Describe only (JOB_METHODS), and Evaluate
takes from it only the job's own videos while the job is not finished (check_scope)."""
import logging
import secrets
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from theval_mesh.backends.media.sources import resolve_uri
from theval_mesh.core.inputs import plan
from theval_mesh.core.preflight import before_work
from theval_mesh.jobs.drivers import last_line, start_driver
from theval_mesh.pure.errors import AccessDenied, NotFound, NotResumable, Overloaded, UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.pure.user_names import check_name
from theval_mesh.rpc.security import ClientSecurity, Tokens, is_wildcard, job_identity, job_of, token_digest
from theval_mesh.rpc.v1 import evaluator_pb2
from theval_mesh.stores.job_store import FINISHED, Job, JobSpec, SqlJobStore, driven_here

log = logging.getLogger("theval.jobs")
STREAM_POLL_S = 0.5
REAP_WAIT_S = 5.0  # how long resume() waits for a dead driver's exit to be reaped
STREAM_KEEPALIVE_S = 10.0
_API = evaluator_pb2.DESCRIPTOR.services_by_name["EvaluatorService"].full_name
JOB_METHODS = frozenset(f"/{_API}/{m}" for m in ("Evaluate", "Describe"))  # what a job's token may call


class SubmittedJobs:
    def __init__(self, store_path, roots, ray_address: str | None = None, workers: int = 2, max_workers: int = 4,
                 max_jobs: int = 2, advertise_host: str | None = None):
        """roots: the folders jobs may read; workers: a job's Ray workers unless it says, at most
        max_workers; max_jobs: jobs running at once; advertise_host: the host jobs' workers dial
        (default: the one bound, loopback for a wildcard)."""
        self.store = SqlJobStore(store_path)
        self.roots, self.ray_address, self.advertise_host = roots, ray_address, advertise_host
        self.workers, self.max_workers, self.max_jobs = workers, max_workers, max_jobs
        self.address: str | None = None  # this evaluator as jobs' workers dial it, once its port is bound
        self._lock = threading.Lock()
        self._drivers: dict = {}  # job id -> Popen of its driver
        # How drivers reach this evaluator (TLS trust, the certificate's name), and the tokens
        # that a job's own joins while its driver runs (None: the API needs no token).
        self.driver_security = ClientSecurity()
        self.tokens: Tokens | None = None

    def trust_drivers(self, security: ClientSecurity, tokens: Tokens | None = None):
        self.driver_security, self.tokens = security, tokens
        if tokens:
            tokens.trust(self._kept_token)

    def bound(self, host: str, port: int):
        host = self.advertise_host or ("127.0.0.1" if is_wildcard(host) else host)
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _issue_token(self, job_id: str) -> str | None:
        if not self.tokens:
            return None
        token = secrets.token_urlsafe(32)
        self.store.keep_token(job_id, token_digest(token))  # in the store: it outlives this process
        return token

    def _kept_token(self, digest: str) -> tuple | None:
        job_id = self.store.token_job(digest)
        return (job_identity(job_id), JOB_METHODS) if job_id else None

    def check_scope(self, who: str, model: str, uri: str, reference: str = ""):
        """A job's token (who names a job) scores its job's own videos (model and path), with no
        reference set, while the job is not finished; AccessDenied else. Other callers pass."""
        job_id = job_of(who)
        if job_id is None:
            return
        if reference:
            raise AccessDenied("a submitted job's token scores without a GT reference set")
        if not self.store.runs_video(job_id, model, uri):
            raise AccessDenied("a submitted job's token scores the videos of its own job, while it runs, only")

    def _revoke(self, token: str | None):
        if token:
            self.store.drop_token(token_digest(token))

    def _path(self, what: str, path: str) -> str:
        if not path:
            raise UserError(f"{what}: give a folder, a video or a .txt list under the allowed roots")
        return resolve_uri(path, self.roots)  # PERMISSION_DENIED outside them

    def inputs(self, gt_name: str, gt: str, models: list[tuple[str, str]]) -> list[list[str]]:
        """A job's [[name, path], ...], the GT first ("GT" unless named): names checked, paths
        under the allowed roots."""
        gt_name = check_name("gt_name", gt_name or "GT")
        return [[gt_name, self._path("gt", gt)]] + [
            [check_name("model name", name), self._path(f"model {name!r}", path)] for name, path in models]

    def submit(self, inputs: list[list[str]], settings: RunSettings, workers: int, owner: str,
               gt_results=None) -> Job:
        """A new job of the videos of `inputs` (core.inputs.plan), its driver started; `workers` 0
        means the evaluator's default. Refused over the evaluator's limits of workers and jobs, and
        (FAILED_PRECONDITION) on inputs the CLI refuses before any work (core.preflight).
        gt_results(gt name, GT files): results of GT videos scored already (a reference set's), committed
        to the job before its driver starts, so they are not scored again."""
        workers = workers or self.workers
        if workers > self.max_workers:
            raise Overloaded(f"workers {workers} is over this evaluator's limit of {self.max_workers} "
                             "per job (--max-job-workers)")
        spec = JobSpec(inputs=inputs, settings=settings.key(), gt_name=inputs[0][0], workers=workers,
                       mesh=self.address, ray_address=self.ray_address, owner=owner)
        self._check_slots()  # before reading the inputs; again under the lock, where it counts
        items = plan([tuple(i) for i in inputs])
        before_work([tuple(i) for i in inputs], items, spec.gt_name, settings.limits, partial=False,
                    allow_unpaired=False, flag="model")
        reused = gt_results(spec.gt_name, [i.video for i in items if i.model == spec.gt_name]) if gt_results else []
        with self._lock:  # counted and started under the lock: two submits cannot both take the last slot
            self._check_slots()
            job = self.store.create(spec, items)
            for result in reused:
                self.store.commit(job.id, result)
            if reused:
                log.info("%s: %d GT video(s) taken from the caller's reference sets, not scored again", job.id,
                         len(reused))
            self._start(job.id, workers, "submitted")
        return self.store.get(job.id)

    def resume(self, job_id: str, owner: str) -> Job:
        """Start the caller's job again with a new driver (and token) when no driver runs it: an
        interrupted or failed one, e.g. after this evaluator's host went down. What is committed
        stays; the rest is scored. NotResumable when it runs, is done or was cancelled."""
        self.get(job_id, owner)
        with self._lock:
            job = self.store.get(job_id)
            driver = self._drivers.get(job_id)
            why = f"job {job_id} is done" if job.state == "done" else \
                f"job {job_id} is already running" if _runs(driver) else job.refusal()
            if why:
                raise NotResumable(why)
            self._check_slots(replacing=job_id)
            self.store.requeue(job_id)
            self._start(job_id, job.spec.workers, "resumed")
        return self.store.get(job_id)

    def _start(self, job_id: str, workers: int, how: str):
        """The job's driver, with a token of its own, and the thread that waits for it (under the lock)."""
        token = self._issue_token(job_id)
        try:
            driver, log_file = start_driver(self.store.path, job_id, workers, self.ray_address,
                                            env=replace(self.driver_security, token=token).env())
        except BaseException:
            self._revoke(token)
            raise
        self._drivers[job_id] = driver
        threading.Thread(target=self._watch, args=(job_id, driver, log_file, token), name=f"watch-{job_id}",
                         daemon=True).start()
        log.info("%s %s: %d workers, driver pid %d (log %s)", job_id, how, workers, driver.pid, log_file)

    def _check_slots(self, replacing: str | None = None):
        """Refuse a job over --max-jobs; `replacing`: a job whose (exited) driver a new one replaces.
        Counted: this evaluator's drivers, and the live drivers on this host that the store names
        (those an earlier run of this evaluator started: they ride through its restart)."""
        here = {job.id for job in self.store.jobs() if driven_here(job)}
        running = len((set(self._drivers) | here) - {replacing})
        if running >= self.max_jobs:
            raise Overloaded(f"{running} jobs are running, this evaluator's limit (--max-jobs): "
                             "submit again when one finishes")

    def _watch(self, job_id: str, driver, log_file, token: str | None = None):
        """Revokes the job's token once its driver exits; a driver that dies before it records an
        end leaves the job queued or running: say why."""
        code = driver.wait()
        self._revoke(token)
        with self._lock:  # with resume(): the job's end is recorded before another driver may take it
            if self._drivers.get(job_id) is not driver:  # resumed meanwhile: a new driver has the job
                return
            self._drivers.pop(job_id)
            if self.store.get(job_id).state in ("queued", "running", "interrupted"):
                # The driver's last line may be a traceback's, with paths and hosts: the caller sees an id.
                error_id = secrets.token_hex(4)
                log.error("%s: driver exited with code %d (error %s): %s", job_id, code, error_id, last_line(log_file))
                self.store.finish(job_id, "interrupted", f"its driver exited with code {code}; see the evaluator's "
                                                         f"log (error {error_id})")
        log.info("%s: driver exited with code %d; the job is %s", job_id, code, self.store.get(job_id).state)

    def get(self, job_id: str, owner: str) -> Job:
        """The caller's job; another caller's, or none, is the same NotFound (no store path, no
        other job ids in it)."""
        try:
            job = self.store.get(job_id)
        except NotFound:
            job = None
        if job is None or job.spec.owner != owner:
            raise NotFound(f"no job {job_id[:64]!r} of yours")
        return job

    def cancel(self, job_id: str, owner: str) -> Job:
        self.get(job_id, owner)
        return self.store.request_cancel(job_id)

    def results(self, job_id: str, owner: str) -> Iterator:
        """The caller's job's committed results, in input order, read a page at a time."""
        self.get(job_id, owner)
        return self.store.results(job_id)

    def updates(self, job_id: str, owner: str, is_active: Callable[[], bool]) -> Iterator[Job]:
        """The job now, then at each change of its state or counts (and every STREAM_KEEPALIVE_S),
        until it stops or is_active() says the caller is gone."""
        self.get(job_id, owner)
        last, sent_at = None, 0.0
        while is_active():
            job = self.store.get(job_id)
            now = (job.state, job.done, job.failed)
            if now != last or time.monotonic() - sent_at > STREAM_KEEPALIVE_S:
                last, sent_at = now, time.monotonic()
                yield job
            if job.state in FINISHED or job.state == "interrupted":
                return
            time.sleep(STREAM_POLL_S)

    def close(self):
        """Drivers keep running: a job depends on this process only through its Evaluate, which
        the drivers retry while it restarts."""
        self.store.close()


def _runs(driver) -> bool:
    """Whether a driver this evaluator started still runs. poll() cannot say: while the job's
    watcher waits on it, poll() answers None even for a driver already killed (the job store sees
    it dead at once), so wait a moment for its exit to be reaped."""
    if driver is None:
        return False
    try:
        driver.wait(timeout=REAP_WAIT_S)
    except subprocess.TimeoutExpired:
        return True
    return False
