"""GT reference sets and the videos scored against them, in SQLite (WAL mode, fsynced commits).

A reference set keeps its per-video results, the mean of every metric (RawRow values, with the
number of videos behind each), the settings and the provenance they were scored with.
"""
import json
import threading
import time
from dataclasses import dataclass, field

from theval_mesh.core.results import VideoResult
from theval_mesh.jobs.job_store import open_sqlite
from theval_mesh.pure.scoring.final_score import RawRow

SCHEMA = """
CREATE TABLE IF NOT EXISTS reference_sets (
    name TEXT PRIMARY KEY, created REAL NOT NULL, settings TEXT NOT NULL, provenance TEXT NOT NULL,
    raw TEXT NOT NULL, counts TEXT NOT NULL, videos INTEGER NOT NULL, scored INTEGER NOT NULL,
    failures TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reference_videos (
    reference TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL, PRIMARY KEY (reference, video));
CREATE TABLE IF NOT EXISTS scored_videos (
    reference TEXT NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (reference, model, video));
"""


@dataclass
class Reference:
    name: str
    settings: dict            # RunSettings.key()
    provenance: dict
    raw: dict                 # canonical metric name -> mean over the scored videos
    counts: dict              # canonical metric name -> videos behind the mean
    videos: int
    scored: int
    failures: list = field(default_factory=list)  # [(video, reason)]
    created: float = 0.0
    owner: str = ""           # the identity that created it: only it may replace it

    def row(self) -> RawRow:
        return RawRow(self.name, self.raw, self.counts, self.provenance)


class ReferenceStore:
    def __init__(self, path):
        self.path = str(path)
        self._db = open_sqlite(self.path, "store")  # the evaluator's job store shares the file
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # a commit is on disk before we answer
            self._db.executescript(SCHEMA)
            for table in ("reference_sets", "scored_videos"):  # stores made before owners existed
                columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                if "owner" not in columns:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN owner TEXT NOT NULL DEFAULT ''")

    def _write(self, statements):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _rows(self, sql, args=()):
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def put(self, ref: Reference, results: list[VideoResult]):
        """Store (or replace) a reference set and its per-video results, atomically."""
        ref.created = ref.created or time.time()
        self._write([
            ("DELETE FROM reference_sets WHERE name = ?", (ref.name,)),
            ("DELETE FROM reference_videos WHERE reference = ?", (ref.name,)),
            # Videos scored against the old set may have used other settings: start afresh.
            ("DELETE FROM scored_videos WHERE reference = ?", (ref.name,)),
            (f"INSERT INTO reference_sets ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             (ref.name, ref.created, json.dumps(ref.settings), json.dumps(ref.provenance), json.dumps(ref.raw),
              json.dumps(ref.counts), ref.videos, ref.scored, json.dumps(ref.failures), ref.owner)),
        ] + [("INSERT OR REPLACE INTO reference_videos VALUES (?, ?, ?)", (ref.name, r.video, r.to_json()))
             for r in results])

    def get(self, name: str) -> Reference | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM reference_sets WHERE name = ?", (name,))
        return _reference(rows[0]) if rows else None

    def all(self) -> list[Reference]:
        return [_reference(r) for r in self._rows(f"SELECT {_COLUMNS} FROM reference_sets ORDER BY name")]

    def reference_videos(self, name: str) -> list[VideoResult]:
        return [VideoResult.from_json(r[0]) for r in self._rows(
            "SELECT result FROM reference_videos WHERE reference = ? ORDER BY video", (name,))]

    def model_owner(self, reference: str, model: str) -> str | None:
        """Who scored the model's first video against the reference set (None: no one yet)."""
        rows = self._rows("SELECT owner FROM scored_videos WHERE reference = ? AND model = ? LIMIT 1",
                          (reference, model))
        return rows[0][0] if rows else None

    def add_scored(self, reference: str, result: VideoResult, owner: str = ""):
        self._write([("INSERT OR REPLACE INTO scored_videos (reference, model, video, result, created, owner) "
                      "VALUES (?, ?, ?, ?, ?, ?)",
                      (reference, result.model, result.video, result.to_json(), time.time(), owner))])

    def scored(self, reference: str) -> list[VideoResult]:
        return [VideoResult.from_json(r[0]) for r in self._rows(
            "SELECT result FROM scored_videos WHERE reference = ? ORDER BY model, video", (reference,))]

    def close(self):
        with self._lock:
            self._db.close()


_COLUMNS = "name, created, settings, provenance, raw, counts, videos, scored, failures, owner"


def _reference(row) -> Reference:
    name, created, settings, provenance, raw, counts, videos, scored, failures, owner = row
    return Reference(name=name, created=created, settings=json.loads(settings), provenance=json.loads(provenance),
                     raw=json.loads(raw), counts=json.loads(counts), videos=videos, scored=scored,
                     failures=[tuple(f) for f in json.loads(failures)], owner=owner)
