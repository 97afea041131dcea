"""The content-addressed cache of per-video results (with their per-frame series): a result is
reused when the same bytes were scored with the same settings by the same backends and tool
version (pure.cache_key), whatever the file's name or folder. In the project's database (a
SQLite file, or PostgreSQL for evaluators on several pods; stores.database), so the CLI, the
API, bulk jobs and the mesh's evaluator share it.

An entry is never trusted blindly: its text must match the digest stored beside it, parse, and
carry the settings and backend identity it is keyed by; anything else is deleted and scored
again. Only scored results are kept (a failed video is tried again next time). The cache is
bounded: past `max_bytes` of results, the least recently used entries go.
"""
import hashlib
import os
import time
from pathlib import Path

from theval_mesh.core.results import FAILED, VideoResult
from theval_mesh.pure.cache_key import cache_key, identity
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.store_location import shown
from theval_mesh.stores.database import open_database

SCHEMA = "result_cache"
MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS result_cache (
    key TEXT PRIMARY KEY, video_sha256 TEXT NOT NULL, result TEXT NOT NULL, digest TEXT NOT NULL,
    bytes INTEGER NOT NULL, created DOUBLE PRECISION NOT NULL, used DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS result_cache_used ON result_cache (used)
"""]
ENV = "THEVAL_CACHE"          # a file or postgresql:// URL, or "off"
OFF = ("off", "none", "0", "")
DEFAULT_MAX_BYTES = 2 << 30    # ~100,000 videos of ~20 kB results
TRIM_EVERY = 64                # puts between size checks (a SUM over the table)
HIT, MISS, STALE, CORRUPT = "hit", "miss", "stale", "corrupt"


def default_location() -> str | None:
    """$THEVAL_CACHE ("off" disables it), else results-cache.sqlite in the user's cache folder."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env.strip().lower() in OFF else env
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return str(Path(base) / "theval" / "results-cache.sqlite")


def enabled() -> bool:
    """Whether a mesh's evaluator keeps a result cache in its own store: when $THEVAL_CACHE is set
    and not off. Opt-in for a server, whose deployment says so; the CLI and API default to on."""
    env = os.environ.get(ENV)
    return env is not None and env.strip().lower() not in OFF


def location(choice) -> str | None:
    """What the commands' --cache/--no-cache and the API's `cache` say: True (or None) for the
    default location, False for none, else a file or URL."""
    if choice is None or choice is True:
        return default_location()
    if choice is False or str(choice).strip().lower() in OFF:
        return None
    return str(choice)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _parsed(text: str) -> VideoResult | None:
    try:
        return VideoResult.from_json(text)
    except Exception:  # noqa: BLE001 - an entry of any broken shape is scored again, never served
        return None


class ResultCache:
    def __init__(self, where: str, max_bytes: int = DEFAULT_MAX_BYTES, warn=None):
        if not str(where).startswith(("postgresql://", "postgres://")):
            Path(where).expanduser().parent.mkdir(parents=True, exist_ok=True)
            where = str(Path(where).expanduser())
        self.location, self.max_bytes, self._puts = where, max_bytes, 0
        self.broken, self.warn = "", warn  # why lookup()/keep() stopped using it; where they say so
        self.db = open_database(where, "result cache", SCHEMA, MIGRATIONS)

    def __repr__(self) -> str:
        return f"ResultCache({shown(self.location)})"

    def close(self):
        self.db.close()

    def get(self, video_sha256: str, settings: dict, provenance: dict) -> tuple[str, VideoResult | None]:
        """(HIT, the result) or (MISS | STALE | CORRUPT, None); a stale or corrupt entry is deleted."""
        key = cache_key(video_sha256, settings, provenance)
        rows = self.db.rows("SELECT result, digest FROM result_cache WHERE key = ?", (key,))
        if not rows:
            return MISS, None
        text, digest = rows[0]
        result = _parsed(text) if _digest(text) == digest else None
        outcome = HIT if result is not None else CORRUPT
        if result is not None and (result.status == FAILED or result.settings != settings
                                   or identity(result.provenance) != identity(provenance)):
            outcome, result = STALE, None
        with self.db.transaction() as db:
            if result is None:
                db.execute("DELETE FROM result_cache WHERE key = ?", (key,))
            else:
                db.execute("UPDATE result_cache SET used = ? WHERE key = ?", (time.time(), key))
        return outcome, result

    def put(self, video_sha256: str, settings: dict, provenance: dict, result: VideoResult) -> bool:
        """Keep a scored result under the key of what it was scored as (settings, provenance:
        those the run expected; a result whose own differ is not kept). False when not kept."""
        if result.status == FAILED or result.settings != settings \
                or identity(result.provenance) != identity(provenance):
            return False
        key = cache_key(video_sha256, settings, provenance)
        text = result.to_json()
        now = time.time()
        with self.db.transaction() as db:  # concurrent writers of one key: the same result, last one stays
            db.execute("INSERT INTO result_cache (key, video_sha256, result, digest, bytes, created, used) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET result = excluded.result, "
                       "digest = excluded.digest, bytes = excluded.bytes, used = excluded.used",
                       (key, video_sha256, text, _digest(text), len(text), now, now))
        self._puts += 1
        if self._puts % TRIM_EVERY == 0:
            self.trim()
        return True

    def lookup(self, video_sha256: str, settings: dict, provenance: dict) -> tuple[str, VideoResult | None]:
        """get() for a run: a cache that fails (disk full, database gone) is a miss, said once,
        and left alone for the rest of the run; it never fails the run."""
        if self.broken:
            return MISS, None
        try:
            return self.get(video_sha256, settings, provenance)
        except Exception as err:  # noqa: BLE001 - any database failure: the run goes on without the cache
            self._break(err)
            return MISS, None

    def keep(self, video_sha256: str, settings: dict, provenance: dict, result: VideoResult) -> bool:
        """put() for a run, failing as lookup() does."""
        if self.broken:
            return False
        try:
            return self.put(video_sha256, settings, provenance, result)
        except Exception as err:  # noqa: BLE001 - any database failure: the run goes on without the cache
            self._break(err)
            return False

    def _break(self, err: Exception):
        self.broken = f"{type(err).__name__}: {err}"
        if self.warn:
            self.warn(f"result cache {shown(self.location)} left out for the rest of this run ({self.broken})")

    def trim(self) -> int:
        """Drop the least recently used entries past max_bytes (down to 90 % of it); how many."""
        total = self.db.rows("SELECT COALESCE(SUM(bytes), 0) FROM result_cache")[0][0]
        if total <= self.max_bytes:
            return 0
        drop, excess = [], total - int(self.max_bytes * 0.9)
        for key, size in self.db.rows("SELECT key, bytes FROM result_cache ORDER BY used"):
            if excess <= 0:
                break
            drop.append(key)
            excess -= size
        with self.db.transaction() as db:
            for key in drop:
                db.execute("DELETE FROM result_cache WHERE key = ?", (key,))
        return len(drop)

    def status(self) -> dict:
        entries, size, videos = self.db.rows(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0), COUNT(DISTINCT video_sha256) FROM result_cache")[0]
        return {"location": shown(self.location), "entries": entries, "videos": videos, "bytes": size,
                "max_bytes": self.max_bytes}

    def clear(self) -> int:
        with self.db.transaction() as db:
            return db.execute("DELETE FROM result_cache").rowcount


def open_cache(where: str | None, warn=None) -> ResultCache | None:
    """The cache at `where` (None: no cache). A cache that cannot be opened (corrupt, newer, no
    permission) is not a reason to stop a run: it runs without it, and `warn` says why."""
    if not where:
        return None
    try:
        return ResultCache(where, warn=warn)
    except (UserError, OSError) as err:
        if warn:
            warn(f"result cache not used: {err} (clear it with `theval cache clear --cache {shown(where)}`, "
                 "or run with --no-cache)")
        return None
