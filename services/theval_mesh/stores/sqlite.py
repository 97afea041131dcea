"""The SQLite database of the stores (stores.database): a file on a local disk, WAL mode (readers in
other processes while one writes), synchronous FULL (a commit is on disk before it returns)."""
import contextlib
import os
import secrets
import sqlite3
import time

from theval_mesh.pure.errors import UserError
from theval_mesh.stores.database import NEWER, Database, Transaction

# PRAGMA user_version is the file's format. theval before `schema_versions` wrote 1 there (its job
# store's schema version) and refuses a file with more: raise it only when a change makes the file
# unsafe for that theval.
FILE_FORMAT = 1
BUSY_TIMEOUT_S = 30  # a writer in another process (a job's driver) holds the file this long at most


def open_sqlite(path: str, what: str) -> sqlite3.Connection:
    """A connection to the SQLite store at `path`, created if absent. An existing file that is
    empty or corrupt is refused: SQLite would silently start a new, empty store in its place."""
    try:
        if not os.path.exists(path):
            _create(path)
        if os.path.getsize(path) == 0:  # never a store theval is making (_create): one emptied since
            raise UserError(f"{what} {path} is empty (0 bytes) but exists: restore it from a backup, or delete it "
                            "to start a new store")
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        check = db.execute("PRAGMA quick_check").fetchall()[0][0]
    except sqlite3.OperationalError as err:  # locked, unreadable...: no proof of damage
        raise UserError(f"{what} {path} cannot be opened ({err}): check its permissions") from None
    except sqlite3.DatabaseError as err:  # not a database, malformed
        check = str(err)
    if check != "ok":
        raise UserError(f"{what} {path} is corrupt ({' '.join(check.split())[:200]}): restore it from a backup, "
                        "or move it aside to start a new store")
    return db


def _create(path: str):
    """A new, empty database at `path`, made whole in a file beside it, then linked to `path`: a
    process opening `path` meanwhile finds no file or a sound one, never SQLite's 0-byte file of a
    store still being made (which is refused as emptied). Of processes creating it at once, the
    first link stands (a link never replaces a file) and the others open that one."""
    path = os.path.realpath(path)  # a link to a store not made yet: made where it points, as SQLite would
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.new")
    try:
        db = sqlite3.connect(temp)  # made by SQLite: the permissions it gives a store
        try:
            db.execute("PRAGMA journal_mode=WAL")  # writes the file's first page; WAL, as the stores use
        finally:
            db.close()
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # another process made it first
        except OSError:  # a file system without hard links: moved there instead, unless one appeared
            if not os.path.exists(path):
                os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


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


class SqliteTransaction(Transaction):
    def __init__(self, connection: sqlite3.Connection):
        self.connection = connection

    def execute(self, sql: str, args=()):
        return self.connection.execute(sql, args)

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.connection.execute(f"PRAGMA table_info({table})")}


class SqliteDatabase(Database):
    def _connect(self):
        self.connection = open_sqlite(self.location, self.what)
        try:
            use_wal(self.connection)
            self.connection.execute("PRAGMA synchronous=FULL")
        except BaseException:
            self.connection.close()
            raise

    def _check_format(self, db):
        file_format = db.execute("PRAGMA user_version").fetchone()[0]
        if file_format > FILE_FORMAT:
            raise UserError(f"{self.what} {self.location} has schema version {file_format}, "
                            + NEWER.format(FILE_FORMAT))
        if file_format != FILE_FORMAT:
            db.execute(f"PRAGMA user_version = {FILE_FORMAT}")

    def _query(self, sql, args):
        return self.connection.execute(sql, args).fetchall()

    def _begin(self):
        self.connection.execute("BEGIN IMMEDIATE")  # the write lock now: no other writer between our read and write
        return SqliteTransaction(self.connection)

    def _commit(self):
        self.connection.execute("COMMIT")

    def _rollback(self):
        if self.connection.in_transaction:  # SQLite may have rolled back itself (disk full)
            self.connection.execute("ROLLBACK")

    def _full(self, err):
        return isinstance(err, sqlite3.OperationalError) and err.sqlite_errorcode == sqlite3.SQLITE_FULL

    def close(self):
        with self.lock:
            self.connection.close()
