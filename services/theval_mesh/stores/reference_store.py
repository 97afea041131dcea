"""GT reference sets and the videos scored against them, in a database (stores.database: a SQLite
file, or PostgreSQL for evaluators on several pods).

A reference set keeps its per-video results, the mean of every metric (RawRow values, with the
number of videos behind each), the settings and the provenance they were scored with. Each owner
(a caller's identity) has a namespace of its own: a set is named by (owner, name), and the
models scored against it are rows of that set, hence its owner's.
"""
import json
import time
from dataclasses import dataclass, field

from theval_mesh.core.results import VideoResult
from theval_mesh.pure.scoring.final_score import RawRow
from theval_mesh.stores.database import add_column, open_database

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
              add_column("scored_videos", "owner", "TEXT NOT NULL DEFAULT ''"),
              # tenants: a set is keyed by (owner, name); its videos and the models scored against
              # it are keyed by its owner too. Old rows keep everything but the scorer of a model,
              # which gives way to the owner of the set it was scored against. Tables are made
              # anew: neither database can change a primary key in place.
              """
CREATE TABLE reference_sets_by_owner (
    owner TEXT NOT NULL, name TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, settings TEXT NOT NULL,
    provenance TEXT NOT NULL, raw TEXT NOT NULL, counts TEXT NOT NULL, videos INTEGER NOT NULL,
    scored INTEGER NOT NULL, failures TEXT NOT NULL, PRIMARY KEY (owner, name));
INSERT INTO reference_sets_by_owner (owner, name, created, settings, provenance, raw, counts, videos, scored, failures)
    SELECT owner, name, created, settings, provenance, raw, counts, videos, scored, failures FROM reference_sets;
CREATE TABLE reference_videos_by_owner (
    owner TEXT NOT NULL, reference TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL,
    PRIMARY KEY (owner, reference, video));
INSERT INTO reference_videos_by_owner (owner, reference, video, result)
    SELECT COALESCE(s.owner, ''), v.reference, v.video, v.result
    FROM reference_videos v LEFT JOIN reference_sets s ON s.name = v.reference;
CREATE TABLE scored_videos_by_owner (
    owner TEXT NOT NULL, reference TEXT NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL, PRIMARY KEY (owner, reference, model, video));
INSERT INTO scored_videos_by_owner (owner, reference, model, video, result, created)
    SELECT COALESCE(s.owner, v.owner), v.reference, v.model, v.video, v.result, v.created
    FROM scored_videos v LEFT JOIN reference_sets s ON s.name = v.reference;
DROP TABLE reference_sets;
DROP TABLE reference_videos;
DROP TABLE scored_videos;
ALTER TABLE reference_sets_by_owner RENAME TO reference_sets;
ALTER TABLE reference_videos_by_owner RENAME TO reference_videos;
ALTER TABLE scored_videos_by_owner RENAME TO scored_videos
""",
              # the SHA-256 of a GT video's bytes as scored (NULL: sent as bytes, or stored before):
              # a job whose GT is these same bytes takes its results (ReferenceSets.gt_results)
              add_column("reference_videos", "sha256", "TEXT")]


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
    owner: str = ""           # the identity that created it: its namespace ("" on a server without tokens)

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

    def put(self, ref: Reference, results: list[VideoResult], digests: dict | None = None):
        """Store (or replace) a reference set of ref.owner and its per-video results, atomically;
        digests: video -> SHA-256 of its bytes as scored (a file's)."""
        digests = digests or {}
        ref.created = ref.created or time.time()
        key = (ref.owner, ref.name)
        self._write([
            ("DELETE FROM reference_sets WHERE owner = ? AND name = ?", key),
            ("DELETE FROM reference_videos WHERE owner = ? AND reference = ?", key),
            # Videos scored against the old set may have used other settings: start afresh.
            ("DELETE FROM scored_videos WHERE owner = ? AND reference = ?", key),
            (f"INSERT INTO reference_sets ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             (ref.name, ref.created, json.dumps(ref.settings), json.dumps(ref.provenance), json.dumps(ref.raw),
              json.dumps(ref.counts), ref.videos, ref.scored, json.dumps(ref.failures), ref.owner)),
        ] + [("INSERT INTO reference_videos (owner, reference, video, result, sha256) VALUES (?, ?, ?, ?, ?) ON "
              "CONFLICT (owner, reference, video) DO UPDATE SET result = excluded.result, sha256 = excluded.sha256",
              key + (r.video, r.to_json(), digests.get(r.video))) for r in results])

    def get(self, owner: str, name: str) -> Reference | None:
        rows = self._sql.rows(f"SELECT {_COLUMNS} FROM reference_sets WHERE owner = ? AND name = ?", (owner, name))
        return _reference(rows[0]) if rows else None

    def all(self, owner: str | None) -> list[Reference]:
        """The sets of `owner` by name; None: every owner's, by owner and name."""
        if owner is None:
            rows = self._sql.rows(f"SELECT {_COLUMNS} FROM reference_sets ORDER BY owner, name")
        else:
            rows = self._sql.rows(f"SELECT {_COLUMNS} FROM reference_sets WHERE owner = ? ORDER BY name", (owner,))
        return [_reference(r) for r in rows]

    def reference_videos(self, owner: str, name: str) -> list[VideoResult]:
        return [VideoResult.from_json(r[0]) for r in self._sql.rows(
            "SELECT result FROM reference_videos WHERE owner = ? AND reference = ? ORDER BY video", (owner, name))]

    def gt_scored(self, owner: str, video: str, sha256: str) -> list[tuple[Reference, VideoResult]]:
        """Each of `owner`'s sets that scored these bytes at this path, with its result."""
        rows = self._sql.rows(
            f"SELECT {', '.join('s.' + c.strip() for c in _COLUMNS.split(','))}, v.result FROM reference_videos v "
            "JOIN reference_sets s ON s.owner = v.owner AND s.name = v.reference "
            "WHERE v.owner = ? AND v.video = ? AND v.sha256 = ? ORDER BY s.created DESC", (owner, video, sha256))
        return [(_reference(r[:-1]), VideoResult.from_json(r[-1])) for r in rows]

    def add_scored(self, owner: str, reference: str, result: VideoResult):
        """A model's video scored against the set `reference` of `owner`."""
        self._write([("INSERT INTO scored_videos (owner, reference, model, video, result, created) "
                      "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner, reference, model, video) DO UPDATE SET "
                      "result = excluded.result, created = excluded.created",
                      (owner, reference, result.model, result.video, result.to_json(), time.time()))])

    def scored(self, owner: str, reference: str) -> list[VideoResult]:
        return [VideoResult.from_json(r[0]) for r in self._sql.rows(
            "SELECT result FROM scored_videos WHERE owner = ? AND reference = ? ORDER BY model, video",
            (owner, reference))]

    def close(self):
        self._sql.close()


_COLUMNS = "name, created, settings, provenance, raw, counts, videos, scored, failures, owner"


def _reference(row) -> Reference:
    name, created, settings, provenance, raw, counts, videos, scored, failures, owner = row
    return Reference(name=name, created=created, settings=json.loads(settings), provenance=json.loads(provenance),
                     raw=json.loads(raw), counts=json.loads(counts), videos=videos, scored=scored,
                     failures=[tuple(f) for f in json.loads(failures)], owner=owner)
