"""Durable scoring jobs in SQLite (WAL mode, synchronous FULL, schema versioned).

A job lists its videos (items); results are keyed by (settings, model, video), so a video is
scored once per settings whatever the job, a second commit of it is a no-op (no duplicates
after any crash), and a job resumes by skipping the items whose result is committed. A result
counts as done only once its commit returned. JobStore is the interface: a server database can
implement it later; SqliteJobStore is the default.
"""
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Iterable, Iterator, Protocol

from ..common.errors import NotFound, UserError
from .inputs import Item
from .results import FAILED, OK, VideoResult

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, created REAL NOT NULL, spec TEXT NOT NULL, settings_key TEXT NOT NULL, total INTEGER NOT NULL, state TEXT NOT NULL, error TEXT,
    cancel INTEGER NOT NULL DEFAULT 0, driver TEXT, heartbeat REAL, started REAL, finished REAL);
CREATE TABLE IF NOT EXISTS items (
    job TEXT NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, missing TEXT,
    PRIMARY KEY (job, seq), UNIQUE (job, model, video));
CREATE TABLE IF NOT EXISTS results (
    settings_key TEXT NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, status TEXT NOT NULL,
    result TEXT NOT NULL, committed REAL NOT NULL, PRIMARY KEY (settings_key, model, video));
CREATE INDEX IF NOT EXISTS results_time ON results (settings_key, committed);
"""
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
    quality_store: str | None = None
    mesh: str | None = None  # HOST:PORT of an evaluator that scores instead of in-process models
    weights: str | None = None  # Final-score weights spec
    ray_address: str | None = None  # where it ran last; `resume` uses it unless told otherwise

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


def _driver_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _driver_alive(driver: str | None, heartbeat: float | None) -> bool:
    if not driver or heartbeat is None or time.time() - heartbeat > STALE_S:
        return False
    host, _, pid = driver.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    return True


class SqliteJobStore:
    """Thread-safe; one connection per store object (a driver and a status reader may open the
    same file from different processes: WAL lets them)."""

    def __init__(self, path):
        self.path = str(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise UserError(f"job store {self.path}: folder {parent} does not exist")
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # committed = on disk
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UserError(f"job store {self.path} has schema version {version}, newer than this "
                                f"theval's {SCHEMA_VERSION}: upgrade theval")
            self._db.executescript(SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ------------------------------------------------------------------ plumbing
    def _query(self, sql: str, args=()) -> list:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _write(self, fn):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self._db)
                self._db.execute("COMMIT")
                return out
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def close(self):
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ jobs
    def create(self, spec: JobSpec, items: Iterable[Item]) -> Job:
        job_id = "job-" + uuid.uuid4().hex[:10]

        def insert(db):
            count = 0
            for item in items:
                cur = db.execute("INSERT OR IGNORE INTO items (job, seq, model, video, missing) VALUES (?,?,?,?,?)",
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
            raise NotFound(f"no job {job_id!r} in {self.path}" + (f" (latest: {known})" if known else ""))
        (jid, spec, state, total, created, error, cancel, driver, heartbeat, started, finished, key) = rows[0]
        counts = dict(self._query(
            "SELECT r.status, count(*) FROM items i JOIN results r ON r.settings_key=? AND r.model=i.model "
            "AND r.video=i.video WHERE i.job=? GROUP BY r.status", (key, jid)))
        if state == "running" and not _driver_alive(driver, heartbeat):
            state = "interrupted"
        job = Job(jid, JobSpec(**json.loads(spec)), state, total, created, counts.get(OK, 0), counts.get(FAILED, 0),
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

    # ------------------------------------------------------------------ items and results
    def pending(self, job_id: str, after: int = -1, limit: int = PAGE) -> list[tuple[int, Item]]:
        """Up to `limit` items after seq `after` with no committed result, in order."""
        rows = self._query(
            "SELECT i.seq, i.model, i.video, i.missing FROM items i JOIN jobs j ON j.id=i.job "
            "LEFT JOIN results r ON r.settings_key=j.settings_key AND r.model=i.model AND r.video=i.video "
            "WHERE i.job=? AND i.seq>? AND r.model IS NULL ORDER BY i.seq LIMIT ?", (job_id, after, limit))
        return [(seq, Item(model, video, missing)) for seq, model, video, missing in rows]

    def commit(self, job_id: str, result: VideoResult) -> bool:
        """Store one video's result durably; False if it was already there (nothing changes)."""
        key = json.dumps(result.settings, sort_keys=True)
        return self._write(lambda db: db.execute(
            "INSERT OR IGNORE INTO results (settings_key, model, video, status, result, committed) "
            "VALUES (?,?,?,?,?,?)", (key, result.model, result.video, result.status, result.to_json(),
                                     time.time())).rowcount == 1)

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
            for seq, text in rows:
                yield VideoResult.from_json(text)
            after = rows[-1][0]

    # ------------------------------------------------------------------ the driver
    def claim(self, job_id: str) -> Job:
        """This process becomes the job's driver; refused while another live driver has it."""
        job = self.get(job_id)
        if job.state == "running":
            raise UserError(f"job {job_id} is already running (driver {job.driver}); see `theval bulk status "
                            f"{job_id}`")
        now = time.time()
        self._write(lambda db: db.execute(
            "UPDATE jobs SET state='running', driver=?, heartbeat=?, started=coalesce(started, ?), error=NULL, "
            "finished=NULL, cancel=0 WHERE id=?", (_driver_id(), now, now, job_id)))
        return self.get(job_id)

    def beat(self, job_id: str) -> bool:
        """Heartbeat of the driver; returns True when a cancel was requested."""
        self._write(lambda db: db.execute("UPDATE jobs SET heartbeat=? WHERE id=?", (time.time(), job_id)))
        return bool(self._query("SELECT cancel FROM jobs WHERE id=?", (job_id,))[0][0])

    def finish(self, job_id: str, state: str, error: str | None = None) -> None:
        assert state in STATES, state
        self._write(lambda db: db.execute(
            "UPDATE jobs SET state=?, error=?, finished=?, heartbeat=NULL WHERE id=?",
            (state, error, time.time() if state in FINISHED else None, job_id)))

    def request_cancel(self, job_id: str) -> Job:
        """A running job stops at its driver's next heartbeat; a job not running is cancelled now."""
        job = self.get(job_id)
        if job.state in FINISHED:
            return job
        if job.state == "running":
            self._write(lambda db: db.execute("UPDATE jobs SET cancel=1 WHERE id=?", (job_id,)))
        else:
            self.finish(job_id, "cancelled")
        return self.get(job_id)
