"""GT reference sets and the videos scored against them, in a database (jobs.database: a SQLite
file, or PostgreSQL for evaluators on several pods).

A reference set keeps its per-video results, the mean of every metric (RawRow values, with the
number of videos behind each), the settings and the provenance they were scored with.
"""
import json
import time
from dataclasses import dataclass, field

from theval_mesh.core.results import VideoResult
from theval_mesh.jobs.database import add_column, open_database
from theval_mesh.pure.scoring.final_score import RawRow

# The reference store's migrations, oldest first; the first two made every store before versions
# were kept per schema (some with the owners, some without), so they must stay harmless on them.
MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS reference_sets (
    name TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, settings TEXT NOT NULL, provenance TEXT NOT NULL,
    raw TEXT NOT NULL, counts TEXT NOT NULL, videos INTEGER NOT NULL, scored INTEGER NOT NULL,
    failures TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reference_videos (
    reference TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL, PRIMARY KEY (reference, video));
CREATE TABLE IF NOT EXISTS scored_videos (
    reference TEXT NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL, PRIMARY KEY (reference, model, video));
""",
              # owners: only the identity that made a set may replace it; a model's rows are its scorer's
              add_column("reference_sets", "owner", "TEXT NOT NULL DEFAULT ''"),
              add_column("scored_videos", "owner", "TEXT NOT NULL DEFAULT ''")]


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
    def __init__(self, location):
        self.path = str(location)  # a file, or a postgresql:// URL
        # "store": the evaluator's job store shares the database
        self._sql = open_database(self.path, "store", "references", MIGRATIONS)

    def _write(self, statements):
        with self._sql.transaction() as db:
            for sql, args in statements:
                db.execute(sql, args)

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
        ] + [("INSERT INTO reference_videos (reference, video, result) VALUES (?, ?, ?) ON CONFLICT "
              "(reference, video) DO UPDATE SET result = excluded.result", (ref.name, r.video, r.to_json()))
             for r in results])

    def get(self, name: str) -> Reference | None:
        rows = self._sql.rows(f"SELECT {_COLUMNS} FROM reference_sets WHERE name = ?", (name,))
        return _reference(rows[0]) if rows else None

    def all(self) -> list[Reference]:
        return [_reference(r) for r in self._sql.rows(f"SELECT {_COLUMNS} FROM reference_sets ORDER BY name")]

    def reference_videos(self, name: str) -> list[VideoResult]:
        return [VideoResult.from_json(r[0]) for r in self._sql.rows(
            "SELECT result FROM reference_videos WHERE reference = ? ORDER BY video", (name,))]

    def model_owner(self, reference: str, model: str) -> str | None:
        """Who scored the model's first video against the reference set (None: no one yet)."""
        rows = self._sql.rows("SELECT owner FROM scored_videos WHERE reference = ? AND model = ? LIMIT 1",
                              (reference, model))
        return rows[0][0] if rows else None

    def add_scored(self, reference: str, result: VideoResult, owner: str = ""):
        self._write([("INSERT INTO scored_videos (reference, model, video, result, created, owner) "
                      "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (reference, model, video) DO UPDATE SET "
                      "result = excluded.result, created = excluded.created, owner = excluded.owner",
                      (reference, result.model, result.video, result.to_json(), time.time(), owner))])

    def scored(self, reference: str) -> list[VideoResult]:
        return [VideoResult.from_json(r[0]) for r in self._sql.rows(
            "SELECT result FROM scored_videos WHERE reference = ? ORDER BY model, video", (reference,))]

    def close(self):
        self._sql.close()


_COLUMNS = "name, created, settings, provenance, raw, counts, videos, scored, failures, owner"


def _reference(row) -> Reference:
    name, created, settings, provenance, raw, counts, videos, scored, failures, owner = row
    return Reference(name=name, created=created, settings=json.loads(settings), provenance=json.loads(provenance),
                     raw=json.loads(raw), counts=json.loads(counts), videos=videos, scored=scored,
                     failures=[tuple(f) for f in json.loads(failures)], owner=owner)
