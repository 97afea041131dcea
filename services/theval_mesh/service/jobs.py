"""The evaluator's bulk jobs (SubmitJob, GetJob, StreamJob, CancelJob). Each job has its own
driver process (orchestrator.drivers), whose Ray workers score through this evaluator's own
Evaluate, so a job's videos go the same path as a client's; each result is committed to the
evaluator's store as it finishes, where GetJob and StreamJob read the progress."""
import logging
import threading
import time

from theval_mesh.backends.media.sources import resolve_uri
from theval_mesh.jobs.drivers import last_line, start_driver
from theval_mesh.jobs.inputs import plan
from theval_mesh.jobs.job_store import FINISHED, JobSpec, SqliteJobStore
from theval_mesh.jobs.telemetry import register_jobs
from theval_mesh.pure.errors import NotFound, Overloaded, UserError
from theval_mesh.rpc.security import ClientSecurity, check_name
from theval_mesh.rpc.servicers.common import run_settings
from theval_mesh.rpc.v1 import evaluator_pb2

log = logging.getLogger("theval.jobs")
STREAM_POLL_S = 0.5
STREAM_KEEPALIVE_S = 10.0


def job_proto(job) -> evaluator_pb2.Job:
    return evaluator_pb2.Job(
        id=job.id, state=job.state, total=job.total, done=job.done, failed=job.failed, remaining=job.remaining,
        rate=job.rate, eta_s=-1.0 if job.eta_s is None else job.eta_s, error=job.error or "",
        created_unix=job.created, started_unix=job.started or 0.0, finished_unix=job.finished or 0.0)


class Jobs:
    def __init__(self, config):
        self.config = config
        self.store = SqliteJobStore(config.store)
        register_jobs(self.store, per_job=False)  # jobs by state on /metrics, no job ids
        self.address: str | None = None  # this evaluator, once its port is bound
        self._lock = threading.Lock()
        self._drivers: dict = {}  # job id -> Popen of its driver
        # How drivers reach this evaluator: its own token (when callers need one) and TLS trust.
        self.driver_security = ClientSecurity()

    def trust_drivers(self, security: ClientSecurity):
        self.driver_security = security

    def bound(self, host: str, port: int):
        self.address = f"{'127.0.0.1' if host in ('', '0.0.0.0', '::') else host}:{port}"

    def _path(self, what: str, path: str) -> str:
        if not path:
            raise UserError(f"{what}: give a folder, a video or a .txt list under the allowed roots")
        return resolve_uri(path, self.config.allowed_roots)  # PERMISSION_DENIED outside them

    def submit(self, request, owner: str) -> evaluator_pb2.Job:
        gt_name = check_name("gt_name", request.gt_name or "GT")
        inputs = [[gt_name, self._path("gt", request.gt)]]
        inputs += [[check_name("model name", m.name), self._path(f"model {m.name!r}", m.path)] for m in request.models]
        settings = run_settings(request.settings, self.config) if request.HasField("settings") else self.config.run
        workers = request.workers or self.config.job_workers
        if workers < 1:
            raise UserError(f"workers must be at least 1, not {workers}")
        if workers > self.config.max_job_workers:
            raise Overloaded(f"workers {workers} is over this evaluator's limit of {self.config.max_job_workers} "
                             "per job (--max-job-workers)")
        spec = JobSpec(inputs=inputs, settings=settings.key(), gt_name=gt_name, workers=workers,
                       mesh=self.address, ray_address=self.config.ray_address, owner=owner)
        with self._lock:  # counted and started under the lock: two submits cannot both take the last slot
            if len(self._drivers) >= self.config.max_jobs:
                raise Overloaded(f"{len(self._drivers)} jobs are running, this evaluator's limit (--max-jobs): "
                                 "submit again when one finishes")
            job = self.store.create(spec, plan([tuple(i) for i in inputs]))
            driver, log_file = start_driver(self.store.path, job.id, workers, self.config.ray_address,
                                            env=self.driver_security.env())
            self._drivers[job.id] = driver
        threading.Thread(target=self._watch, args=(job.id, driver, log_file), name=f"watch-{job.id}",
                         daemon=True).start()
        log.info("%s submitted: %d videos, %d workers, driver pid %d (log %s)", job.id, job.total, workers,
                 driver.pid, log_file)
        return job_proto(self.store.get(job.id))

    def _watch(self, job_id: str, driver, log_file):
        """A driver that dies before it records an end leaves the job queued or running: say why."""
        code = driver.wait()
        with self._lock:
            self._drivers.pop(job_id, None)
        if self.store.get(job_id).state in ("queued", "running", "interrupted"):
            self.store.finish(job_id, "interrupted", f"its driver exited with code {code}: {last_line(log_file)}")
        log.info("%s: driver exited with code %d; the job is %s", job_id, code, self.store.get(job_id).state)

    def _owned(self, job_id: str, owner: str):
        """The caller's job; another caller's, or none, is the same NOT_FOUND (no store path, no
        other job ids in it)."""
        try:
            job = self.store.get(job_id)
        except NotFound:
            job = None
        if job is None or job.spec.owner != owner:
            raise NotFound(f"no job {job_id[:64]!r} of yours")
        return job

    def get(self, job_id: str, owner: str) -> evaluator_pb2.Job:
        return job_proto(self._owned(job_id, owner))

    def cancel(self, job_id: str, owner: str) -> evaluator_pb2.Job:
        self._owned(job_id, owner)
        return job_proto(self.store.request_cancel(job_id))

    def results(self, job_id: str, owner: str):
        """The caller's job's committed results, in input order, read a page at a time."""
        self._owned(job_id, owner)
        return self.store.results(job_id)

    def stream(self, job_id: str, owner: str, context):
        """The job now, then at each change of its state or counts, until it stops."""
        self._owned(job_id, owner)
        last, sent_at = None, 0.0
        while context.is_active():
            job = self.store.get(job_id)
            now = (job.state, job.done, job.failed)
            if now != last or time.monotonic() - sent_at > STREAM_KEEPALIVE_S:
                last, sent_at = now, time.monotonic()
                yield job_proto(job)
            if job.state in FINISHED or job.state == "interrupted":
                return
            time.sleep(STREAM_POLL_S)

    def close(self):
        """Drivers keep running: a job depends on this process only through its Evaluate, which
        the drivers retry while it restarts."""
        self.store.close()
