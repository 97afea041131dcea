"""The database under the job store and the reference store (the evaluator keeps both in one):
a SQLite file (the default; one writer at a time, for one machine) or a PostgreSQL server (a
`postgresql://` URL; for evaluators on several pods). One dialect for both: `?` placeholders,
ON CONFLICT upserts, TEXT / INTEGER / DOUBLE PRECISION columns.

Each store names its schema and lists its migrations, oldest first; the number applied is kept
per schema in the `schema_versions` table, so two schemas can share a database and move on their
own. Stores made before that table existed have no row: their schema is at version 0 and every
step runs, so the steps that made those stores must be harmless on a store that has them
(CREATE ... IF NOT EXISTS, add_column).
"""
import threading
from collections.abc import Callable
from contextlib import contextmanager

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.store_location import is_server, shown

# A step: SQL statements separated by ";" (no ";" inside literals), or a function of the transaction.
Step = str | Callable[["Transaction"], None]
NEWER = "newer than this theval's {}: upgrade theval"


class DiskFull(Exception):
    """The storage under the database is full; the transaction was undone."""


class Transaction:
    """What a migration step or a store's write sees: execute(sql, args) returning a cursor
    (fetchone, fetchall, rowcount), and the columns of a table."""

    def execute(self, sql: str, args=()): ...
    def columns(self, table: str) -> set[str]: ...


def add_column(table: str, column: str, declaration: str) -> Step:
    """A step adding a column unless the table has it (stores that predate the versions may)."""
    def step(db: Transaction):
        if column not in db.columns(table):
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    return step


class Database:
    """One connection shared by a store's threads under a lock. Writes are transactions that
    exclude every other writer of the database (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory
    lock), so a read followed by a write in one transaction sees no other write between them."""

    def __init__(self, location, what: str, schema: str, migrations: list[Step]):
        self.location, self.what = str(location), what
        self.lock = threading.Lock()
        self._connect()
        try:
            with self.transaction() as db:  # one process migrates; the others wait, then find it done
                self._migrate(db, schema, migrations)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ per dialect
    def _connect(self): ...
    def _query(self, sql: str, args) -> list: ...
    def _begin(self) -> Transaction: ...
    def _commit(self): ...
    def _rollback(self): ...
    def _full(self, err: BaseException) -> bool: ...
    def _check_format(self, db: Transaction): """Refuse a database this theval cannot read."""
    def close(self): ...

    # ------------------------------------------------------------------ shared
    def _migrate(self, db: Transaction, schema: str, migrations: list[Step]):
        self._check_format(db)
        db.execute("CREATE TABLE IF NOT EXISTS schema_versions (name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        row = db.execute("SELECT version FROM schema_versions WHERE name = ?", (schema,)).fetchone()
        version = row[0] if row else 0
        if version > len(migrations):
            raise UserError(f"{self.what} {shown(self.location)} has {schema} schema version {version}, "
                            + NEWER.format(len(migrations)))
        for step in migrations[version:]:
            if callable(step):
                step(db)
            else:  # statement by statement: a script would commit the transaction first (SQLite)
                for statement in filter(str.strip, step.split(";")):
                    db.execute(statement)
        if row is None or version < len(migrations):  # else nothing to write (each open would sync)
            db.execute("INSERT INTO schema_versions (name, version) VALUES (?, ?) "
                       "ON CONFLICT (name) DO UPDATE SET version = excluded.version", (schema, len(migrations)))

    def rows(self, sql: str, args=()) -> list:
        with self.lock:
            return self._query(sql, args)

    @contextmanager
    def transaction(self):
        """A write transaction: committed at the end of the block, undone if it raises; DiskFull
        when the storage is full."""
        with self.lock:
            db = self._begin()
            try:
                yield db
                self._commit()
            except BaseException as err:
                self._rollback()
                if self._full(err):
                    raise DiskFull(str(err)) from err
                raise


def open_database(location, what: str, schema: str, migrations: list[Step]) -> Database:
    """The database at `location`: a postgresql:// URL, else a SQLite file (created if absent)."""
    if is_server(location):
        from theval_mesh.stores.postgres import PostgresDatabase  # psycopg only where a server is used
        return PostgresDatabase(location, what, schema, migrations)
    from theval_mesh.stores.sqlite import SqliteDatabase
    return SqliteDatabase(location, what, schema, migrations)
