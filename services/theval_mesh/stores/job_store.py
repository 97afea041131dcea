"""Durable scoring jobs in a database (stores.database: a SQLite file, or PostgreSQL), schema versioned.

A job lists its videos (items); results are keyed by (settings, model, video), so a video is
scored once per settings whatever the job, a second commit of an ok result is a no-op (no
duplicates after any crash), and a job resumes by skipping the items whose ok result is committed:
a failed one is scored again (the file may have been fixed), its new result replacing the old. A result
counts as done only once its commit returned. JobStore is the interface; SqlJobStore keeps it in
either database.
"""
import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Iterable, Iterator, Protocol

from theval_mesh.core.inputs import Item
from theval_mesh.core.results import FAILED, OK, VideoResult
from theval_mesh.pure.errors import NotFound, UserError
from theval_mesh.pure.store_location import is_server, shown
from theval_mesh.stores.database import DiskFull, open_database

# The job store's migrations, oldest first; the first made every store before
# versions were kept per schema, so it must stay harmless on them.
MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, spec TEXT NOT NULL, settings_key TEXT NOT NULL,
    total INTEGER NOT NULL, state TEXT NOT NULL, error TEXT, cancel INTEGER NOT NULL DEFAULT 0, driver TEXT,
    heartbeat DOUBLE PRECISION, started DOUBLE PRECISION, finished DOUBLE PRECISION);
CREATE TABLE IF NOT EXISTS items (
    job TEXT NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, missing TEXT,
    PRIMARY KEY (job, seq), UNIQUE (job, model, video));
CREATE TABLE IF NOT EXISTS results (
    settings_key TEXT NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, status TEXT NOT NULL,
    result TEXT NOT NULL, committed DOUBLE PRECISION NOT NULL, PRIMARY KEY (settings_key, model, video));
CREATE INDEX IF NOT EXISTS results_time ON results (settings_key, committed);
""",
              # submitted jobs' tokens (SHA-256 of each): an evaluator restarted, or another one on
              # the same store, knows them, so a job's workers ride through a restart
              "CREATE TABLE IF NOT EXISTS job_tokens (digest TEXT PRIMARY KEY, job TEXT NOT NULL)"]
STATES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
FINISHED = ("done", "failed", "cancelled")
HEARTBEAT_S = 5.0
STALE_S = 30.0  # a running job whose driver has not beaten for this long was interrupted
PAGE = 256


@dataclass
class JobSpec:
    """What a job scores and how; everything needed to run or resume it anywhere."""
    inputs: list            # [[name, path], ...]: the GT first
    settings: dict          # RunSettings.key()
    gt_name: str = "GT"
    workers: int = 1
    weights_store: str | None = None  # every network's weights (quality models, FaceXFormer, detectors)
    mesh: str | None = None  # HOST:PORT of an evaluator that scores instead of in-process models
    weights: str | None = None  # Final-score weights spec
    partial_score: bool = False  # a Final score over the metrics the GT can normalise (labelled partial)
    ray_address: str | None = None  # where it ran last; `resume` uses it unless told otherwise
    owner: str = ""  # the identity that submitted it to an evaluator: only it may see or cancel it
    cache: str | None = None  # the result cache's file or URL (stores.result_cache); None: no cache
    inference: dict | None = None  # pure.inference.InferenceOptions as a dict; None: auto, fp32

    def __post_init__(self):
        # The one check of a job's workers: every job (evaluate, bulk, SubmitJob, a resume's
        # override through dataclasses.replace) is a JobSpec.
        if self.workers < 1:
            raise UserError(f"workers must be at least 1, not {self.workers}")

    def settings_key(self) -> str:
        return json.dumps(self.settings, sort_keys=True)


@dataclass
class Job:
    id: str
    spec: JobSpec
    state: str
    total: int
    created: float
    done: int = 0      # committed ok
    failed: int = 0    # committed failed (a bad video, with its reason)
    error: str | None = None
    cancel: bool = False
    driver: str | None = None
    heartbeat: float | None = None
    started: float | None = None
    finished: float | None = None
    rate: float = 0.0  # videos committed per second lately

    @property
    def remaining(self) -> int:
        return self.total - self.done - self.failed

    @property
    def eta_s(self) -> float | None:
        return self.remaining / self.rate if self.rate > 0 else None

    def refusal(self) -> str | None:
        """Why a driver cannot take this job now (None: it can)."""
        return _refusal(self.id, self.state, self.cancel, self.driver, self.heartbeat)


class JobStore(Protocol):
    def create(self, spec: JobSpec, items: Iterable[Item]) -> Job: ...
    def get(self, job_id: str) -> Job: ...
    def jobs(self) -> list[Job]: ...
    def pending(self, job_id: str, after: int = -1, limit: int = PAGE) -> list[tuple[int, Item]]: ...
    def commit(self, job_id: str, result: VideoResult) -> bool: ...
    def results(self, job_id: str) -> Iterator[VideoResult]: ...
    def claim(self, job_id: str) -> Job: ...
    def beat(self, job_id: str) -> bool: ...
    def finish(self, job_id: str, state: str, error: str | None = None) -> None: ...
    def request_cancel(self, job_id: str) -> Job: ...


class StoreFull(UserError):
    """The disk holding the store is full: the write was undone, earlier commits are kept."""


def _start_time(pid: int) -> str | None:
    """The start time of a live process (/proc/PID/stat field 22: a reused pid has another one);
    None when it is gone or a zombie (killed, not reaped yet); "" when unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    except OSError:
        pass
    try:  # no /proc, or another user's process hidden there
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return ""


def _driver_id() -> str:
    """host:pid:start time, so that on this host a dead driver is known at once."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid()) or ''}"


RENAMED = {"quality_store": "weights_store"}  # JobSpec fields of stores written before a rename


def _spec(text: str) -> JobSpec:
    """A stored JobSpec, its fields renamed since read under their new names."""
    fields = json.loads(text)
    return JobSpec(**{RENAMED.get(k, k): v for k, v in fields.items()})


def driven_here(job: "Job") -> bool:
    """Whether a live driver on this host runs the job (e.g. one an evaluator started before it
    restarted: the driver outlives it)."""
    return job.state == "running" and (job.driver or "").partition(":")[0] == socket.gethostname()


def _driver_alive(driver: str | None, heartbeat: float | None) -> bool:
    if not driver or heartbeat is None or time.time() - heartbeat > STALE_S:
        return False
    host, _, rest = driver.partition(":")
    pid, _, started = rest.partition(":")  # no start time: written by an older theval
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another host's driver: only its heartbeat tells
    now = _start_time(int(pid))
    return now is not None and (not started or not now or now == started)


def _refusal(job_id: str, state: str, cancel, driver: str | None, heartbeat: float | None) -> str | None:
    """Why the job cannot get a driver now (None: it can). A cancel is final."""
    if state == "cancelled" or cancel:
        return (f"job {job_id} was cancelled: its committed results are kept; submit the same videos again to "
                "score the rest (what is scored is reused)")
    if state != "running" or not _driver_alive(driver, heartbeat):
        return None
    text = f"job {job_id} is already running (driver {driver}); see `theval bulk status {job_id}`"
    if driver.partition(":")[0] != socket.gethostname():  # its liveness is unknown here: say when it counts
        wait = max(1, round(heartbeat + STALE_S - time.time()))
        text += f"; if that driver is gone, try again in {wait} s (when its heartbeat is {STALE_S:.0f} s old)"
    return text


class SqlJobStore:
    """Thread-safe; one connection per store object (a driver and a status reader may open the
    same store from different processes)."""

    def __init__(self, location):
        self.path = str(location)  # a file, or a postgresql:// URL
        parent = os.path.dirname(os.path.abspath(self.path))
        if not is_server(self.path) and not os.path.isdir(parent):
            raise UserError(f"job store {self.path}: folder {parent} does not exist")
        self._sql = open_database(self.path, "job store", "jobs", MIGRATIONS)
        self.shown = shown(self.path)  # in messages: no password

    # ------------------------------------------------------------------ plumbing
    def _query(self, sql: str, args=()) -> list:
        return self._sql.rows(sql, args)

    def _write(self, fn, job_id: str | None = None):
        """fn(db) in one transaction; a full disk undoes it and raises StoreFull (about `job_id`)."""
        try:
            with self._sql.transaction() as db:
                return fn(db)
        except DiskFull:
            if job_id is None:
                raise StoreFull(f"the disk holding {self.shown} is full: nothing was written; free space and "
                                "try again") from None
            job = self.get(job_id)
            raise StoreFull(f"the disk holding {self.shown} is full: {job.done + job.failed} results committed so "
                            f"far are kept; free space and run `theval bulk resume {job_id} --store {self.shown}`"
                            ) from None

    def close(self):
        self._sql.close()

    # ------------------------------------------------------------------ jobs
    def create(self, spec: JobSpec, items: Iterable[Item]) -> Job:
        job_id = "job-" + uuid.uuid4().hex[:10]

        def insert(db):
            count = 0
            for item in items:
                cur = db.execute("INSERT INTO items (job, seq, model, video, missing) VALUES (?,?,?,?,?) "
                                 "ON CONFLICT DO NOTHING",
                                 (job_id, count, item.model, item.video, item.missing))
                count += cur.rowcount
            db.execute("INSERT INTO jobs (id, created, spec, settings_key, total, state) VALUES (?,?,?,?,?,?)",
                       (job_id, time.time(), json.dumps(asdict(spec)), spec.settings_key(), count, "queued"))
        self._write(insert)
        return self.get(job_id)

    def get(self, job_id: str) -> Job:
        rows = self._query("SELECT id, spec, state, total, created, error, cancel, driver, heartbeat, started, "
                           "finished, settings_key FROM jobs WHERE id=?", (job_id,))
        if not rows:
            known = ", ".join(j for (j,) in self._query("SELECT id FROM jobs ORDER BY created DESC LIMIT 5"))
            raise NotFound(f"no job {job_id!r} in {self.shown}" + (f" (latest: {known})" if known else ""))
        (jid, spec, state, total, created, error, cancel, driver, heartbeat, started, finished, key) = rows[0]
        counts = dict(self._query(
            "SELECT r.status, count(*) FROM items i JOIN results r ON r.settings_key=? AND r.model=i.model "
            "AND r.video=i.video WHERE i.job=? GROUP BY r.status", (key, jid)))
        if state == "running" and not _driver_alive(driver, heartbeat):
            state = "cancelled" if cancel else "interrupted"
        job = Job(jid, _spec(spec), state, total, created, counts.get(OK, 0), counts.get(FAILED, 0),
                  error, bool(cancel), driver, heartbeat, started, finished)
        job.rate = self._rate(jid, key, started)
        return job

    def _rate(self, job_id: str, key: str, started: float | None, window_s: float = 120.0) -> float:
        if started is None:
            return 0.0
        since = max(started, time.time() - window_s)
        (n,) = self._query("SELECT count(*) FROM items i JOIN results r ON r.settings_key=? AND r.model=i.model "
                           "AND r.video=i.video WHERE i.job=? AND r.committed>=?", (key, job_id, since))[0]
        span = time.time() - since
        return n / span if span > 0 else 0.0

    def jobs(self) -> list[Job]:
        return [self.get(j) for (j,) in self._query("SELECT id FROM jobs ORDER BY created")]

    def scored_otherwise(self, items: Iterable[Item], settings_key: str) -> dict[str, int]:
        """Of `items`, those with a result under other settings only (so scored again now): the
        other settings' key -> how many."""
        wanted = {(i.model, i.video) for i in items}
        have = set(self._query("SELECT model, video FROM results WHERE settings_key=?", (settings_key,)))
        counts: dict[str, int] = {}
        for key, model, video in self._query("SELECT settings_key, model, video FROM results WHERE settings_key<>?",
                                             (settings_key,)):
            if (model, video) in wanted and (model, video) not in have:
                counts[key] = counts.get(key, 0) + 1
        return counts

    # ------------------------------------------------------------------ items and results
    def pending(self, job_id: str, after: int = -1, limit: int = PAGE) -> list[tuple[int, Item]]:
        """Up to `limit` items after seq `after` with no ok result, in order: a video that failed
        (unreadable, then fixed; a worker's crash) is scored again by the next run or resume. One
        pass over the pages scores each item once: a failure committed now is after `after`."""
        rows = self._query(
            "SELECT i.seq, i.model, i.video, i.missing FROM items i JOIN jobs j ON j.id=i.job "
            "LEFT JOIN results r ON r.settings_key=j.settings_key AND r.model=i.model AND r.video=i.video "
            f"WHERE i.job=? AND i.seq>? AND (r.model IS NULL OR r.status='{FAILED}') ORDER BY i.seq LIMIT ?",
            (job_id, after, limit))
        return [(seq, Item(model, video, missing)) for seq, model, video, missing in rows]

    # ------------------------------------------------------------------ submitted jobs' tokens
    def keep_token(self, job_id: str, digest: str):
        self._write(lambda db: db.execute("INSERT INTO job_tokens (digest, job) VALUES (?, ?)", (digest, job_id)),
                    job_id)

    def token_job(self, digest: str) -> str | None:
        """The job whose token has this digest, while that job is not finished."""
        rows = self._query("SELECT t.job FROM job_tokens t JOIN jobs j ON j.id = t.job WHERE t.digest = ? AND "
                           f"j.state NOT IN ({', '.join(repr(s) for s in FINISHED)})", (digest,))
        return rows[0][0] if rows else None

    def drop_token(self, digest: str):
        self._write(lambda db: db.execute("DELETE FROM job_tokens WHERE digest = ?", (digest,)))

    def runs_video(self, job_id: str, model: str, video: str) -> bool:
        """Whether the job is not finished and (model, video) is one of its items: one lookup in the
        items' unique index, whatever the job's size (it is asked on every Evaluate of a job)."""
        return bool(self._query(
            "SELECT 1 FROM items i JOIN jobs j ON j.id = i.job WHERE i.job = ? AND i.model = ? AND i.video = ? AND "
            f"j.state NOT IN ({', '.join(repr(s) for s in FINISHED)})", (job_id, model, video)))

    def commit(self, job_id: str, result: VideoResult) -> bool:
        """Store one video's result durably, replacing a failed one; False when an ok result was there
        already (nothing changes: an ok result is never scored twice nor replaced)."""
        key = json.dumps(result.settings, sort_keys=True)
        return self._write(lambda db: db.execute(
            "INSERT INTO results (settings_key, model, video, status, result, committed) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT (settings_key, model, video) DO UPDATE SET status=excluded.status, result=excluded.result, "
            f"committed=excluded.committed WHERE results.status='{FAILED}'",
            (key, result.model, result.video, result.status, result.to_json(), time.time())).rowcount == 1, job_id)

    def results(self, job_id: str) -> Iterator[VideoResult]:
        """The job's committed results, in item order, a page at a time."""
        after = -1
        while True:
            rows = self._query(
                "SELECT i.seq, r.result FROM items i JOIN jobs j ON j.id=i.job JOIN results r ON "
                "r.settings_key=j.settings_key AND r.model=i.model AND r.video=i.video "
                "WHERE i.job=? AND i.seq>? ORDER BY i.seq LIMIT ?", (job_id, after, PAGE))
            if not rows:
                return
            for _, text in rows:
                yield VideoResult.from_json(text)
            after = rows[-1][0]

    # ------------------------------------------------------------------ the driver
    def claim(self, job_id: str) -> Job:
        """This process becomes the job's driver; refused while another live driver has it, and for a
        cancelled job (a cancel is final). Checked and taken in one transaction: no race."""
        self.get(job_id)  # NotFound

        def take(db):
            why = _refusal(job_id, *db.execute("SELECT state, cancel, driver, heartbeat FROM jobs WHERE id=?",
                                               (job_id,)).fetchone())
            if why:
                raise UserError(why)
            now = time.time()
            db.execute("UPDATE jobs SET state='running', driver=?, heartbeat=?, started=coalesce(started, ?), "
                       "error=NULL, finished=NULL WHERE id=?", (_driver_id(), now, now, job_id))
        self._write(take, job_id)
        return self.get(job_id)

    def requeue(self, job_id: str):
        """An interrupted or failed job is queued again (its new driver then claims it); so is one
        still stored as running whose driver is dead (killed, its end not recorded yet)."""
        def queue(db):
            state, driver, heartbeat = db.execute("SELECT state, driver, heartbeat FROM jobs WHERE id=?",
                                                  (job_id,)).fetchone()
            if state in ("interrupted", "failed") or (state == "running" and not _driver_alive(driver, heartbeat)):
                db.execute("UPDATE jobs SET state='queued', error=NULL, finished=NULL, heartbeat=NULL WHERE id=?",
                           (job_id,))
        self._write(queue, job_id)

    def beat(self, job_id: str) -> bool:
        """Heartbeat of the driver; returns True when a cancel was requested."""
        self._write(lambda db: db.execute("UPDATE jobs SET heartbeat=? WHERE id=?", (time.time(), job_id)), job_id)
        return bool(self._query("SELECT cancel FROM jobs WHERE id=?", (job_id,))[0][0])

    def finish(self, job_id: str, state: str, error: str | None = None) -> None:
        assert state in STATES, state
        self._write(lambda db: db.execute(
            "UPDATE jobs SET state=?, error=?, finished=?, heartbeat=NULL WHERE id=?",
            (state, error, time.time() if state in FINISHED else None, job_id)), job_id)

    def request_cancel(self, job_id: str) -> Job:
        """A running job stops at its driver's next heartbeat; a job not running is cancelled now.
        One transaction: a driver claiming the job meanwhile sees the cancel."""
        self.get(job_id)  # NotFound

        def cancel(db):
            state, driver, heartbeat = db.execute("SELECT state, driver, heartbeat FROM jobs WHERE id=?",
                                                  (job_id,)).fetchone()
            if state in FINISHED:
                return
            if state != "running" or not _driver_alive(driver, heartbeat):
                state = "cancelled"
            db.execute("UPDATE jobs SET cancel=1, state=?, finished=? WHERE id=?",
                       (state, time.time() if state == "cancelled" else None, job_id))
        self._write(cancel, job_id)
        return self.get(job_id)
