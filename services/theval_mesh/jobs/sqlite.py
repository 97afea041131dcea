"""The SQLite plumbing of the job store and the reference store (the evaluator keeps both in one
file): opening a file safely, per-schema migrations, transactions.

Each store names its schema and lists its migrations, oldest first; the number applied is kept
per schema in the `schema_versions` table, so two schemas can share a file and move on their
own. Stores made before that table existed have no row: their schema is at version 0 and every
step runs, so the steps that made those stores must be harmless on a store that has them
(CREATE ... IF NOT EXISTS, add_column).
"""
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from theval_mesh.pure.errors import UserError

# A step: SQL statements separated by ";" (no ";" inside literals), or a function of the connection.
Step = str | Callable[[sqlite3.Connection], None]

# PRAGMA user_version is the file's format. theval before `schema_versions` wrote 1 there (its job
# store's schema version) and refuses a file with more: raise it only when a change makes the file
# unsafe for that theval.
FILE_FORMAT = 1
BUSY_TIMEOUT_S = 30  # a writer in another process (a job's driver) holds the file this long at most


def open_sqlite(path: str, what: str) -> sqlite3.Connection:
    """A connection to the SQLite store at `path`, created if absent. An existing file that is
    empty or corrupt is refused: SQLite would silently start a new, empty store in its place."""
    existed = os.path.exists(path)
    if existed and os.path.getsize(path) == 0:
        raise UserError(f"{what} {path} is empty (0 bytes) but exists: restore it from a backup, or delete it "
                        "to start a new store")
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        check = db.execute("PRAGMA quick_check").fetchall()[0][0] if existed else "ok"
    except sqlite3.OperationalError as err:  # locked, unreadable...: no proof of damage
        raise UserError(f"{what} {path} cannot be opened ({err}): check its permissions") from None
    except sqlite3.DatabaseError as err:  # not a database, malformed
        check = str(err)
    if check != "ok":
        raise UserError(f"{what} {path} is corrupt ({' '.join(check.split())[:200]}): restore it from a backup, "
                        "or move it aside to start a new store")
    return db


def add_column(table: str, column: str, declaration: str) -> Step:
    """A step adding a column unless the table has it (stores that predate the versions may)."""
    def step(db):
        if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    return step


def use_wal(db: sqlite3.Connection):
    """Switch the file to WAL (outside a transaction). SQLite answers "database is locked" at once,
    without its busy handler, while another process switches the same file: retry until the
    busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class Database:
    """One connection to a store file, shared by a store's threads under a lock; WAL mode (readers
    in other processes while one writes) and synchronous FULL (a commit is on disk before it
    returns)."""

    def __init__(self, path, what: str, schema: str, migrations: list[Step]):
        self.path, self.what = str(path), what
        self.connection = open_sqlite(self.path, what)
        self.lock = threading.Lock()
        try:
            use_wal(self.connection)
            self.connection.execute("PRAGMA synchronous=FULL")
            with self.transaction() as db:  # one process migrates; the others wait, then find it done
                self._migrate(db, schema, migrations)
        except BaseException:
            self.connection.close()
            raise

    def _migrate(self, db, schema: str, migrations: list[Step]):
        newer = "newer than this theval's {}: upgrade theval"
        file_format = db.execute("PRAGMA user_version").fetchone()[0]
        if file_format > FILE_FORMAT:
            raise UserError(f"{self.what} {self.path} has schema version {file_format}, "
                            + newer.format(FILE_FORMAT))
        db.execute("CREATE TABLE IF NOT EXISTS schema_versions (name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        row = db.execute("SELECT version FROM schema_versions WHERE name = ?", (schema,)).fetchone()
        version = row[0] if row else 0
        if version > len(migrations):
            raise UserError(f"{self.what} {self.path} has {schema} schema version {version}, "
                            + newer.format(len(migrations)))
        for step in migrations[version:]:
            if callable(step):
                step(db)
            else:  # not executescript(): it would commit the transaction first
                for statement in filter(str.strip, step.split(";")):
                    db.execute(statement)
        if row is None or version < len(migrations):  # else nothing to write (each open would fsync)
            db.execute("INSERT OR REPLACE INTO schema_versions (name, version) VALUES (?, ?)",
                       (schema, len(migrations)))
        if file_format != FILE_FORMAT:
            db.execute(f"PRAGMA user_version = {FILE_FORMAT}")

    def rows(self, sql: str, args=()) -> list:
        with self.lock:
            return self.connection.execute(sql, args).fetchall()

    @contextmanager
    def transaction(self):
        """The connection, in one write transaction: committed at the end of the block, undone if
        it raises."""
        with self.lock:
            db = self.connection
            db.execute("BEGIN IMMEDIATE")  # the write lock now: no other writer between our read and write
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite may have rolled back itself (disk full)
                    db.execute("ROLLBACK")
                raise

    def close(self):
        with self.lock:
            self.connection.close()
