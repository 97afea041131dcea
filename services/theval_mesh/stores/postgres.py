"""The PostgreSQL database of the stores (stores.database), for evaluators on several pods and bulk
drivers anywhere: a `postgresql://USER@HOST:PORT/DB?sslmode=verify-full` URL (libpq's; keep the
password out of it: PGPASSWORD or a PGPASSFILE, so that it shows in no command line)."""
import psycopg

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.store_location import shown
from theval_mesh.stores.database import Database, Transaction

# Every writer of a database takes this transaction-scoped advisory lock first: one writer at a
# time, as with SQLite, so a store's read-then-write transactions (claiming a job) cannot race.
WRITE_LOCK = 0x7468_6576_616C  # "theval"
LOCK_TIMEOUT_S = 30  # as SQLite's busy timeout: a writer holds the database this long at most
CONNECT_TIMEOUT_S = 10


def _sql(sql: str) -> str:
    """The stores' `?` placeholders as psycopg's (a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresTransaction(Transaction):
    def __init__(self, connection: psycopg.Connection):
        self.connection = connection

    def execute(self, sql: str, args=()):
        return self.connection.execute(_sql(sql), args)

    def columns(self, table: str) -> set[str]:
        return {name for (name,) in self.connection.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s", (table,))}


class PostgresDatabase(Database):
    connection = None

    def _connect(self):
        try:
            self.connection = psycopg.connect(self.location, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                              application_name="theval")
        except psycopg.Error as err:
            reason = " ".join(str(err).split())[:300]
            raise UserError(f"{self.what} {shown(self.location)} cannot be reached ({reason}): check the URL, "
                            "that the server runs, and the password (PGPASSWORD or PGPASSFILE)") from None
        self.connection.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_S}s'")

    def _again(self, first):
        """first(connection), once more on a new connection if the server had closed this one (a
        restart, a failover, an idle timeout): only for what is safe to repeat, a read or a BEGIN."""
        if self.connection is None or self.connection.closed:
            self._connect()
        try:
            return first(self.connection)
        except psycopg.OperationalError:
            if not self.connection.broken:
                raise
        self._connect()
        return first(self.connection)

    def _query(self, sql, args):
        return self._again(lambda c: c.execute(_sql(sql), args).fetchall())

    def _begin(self):
        def begin(connection):
            connection.execute("BEGIN")
            return connection
        connection = self._again(begin)
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        return PostgresTransaction(connection)

    def _commit(self):
        self.connection.execute("COMMIT")

    def _rollback(self):
        if not (self.connection.closed or self.connection.broken):
            self.connection.execute("ROLLBACK")  # a no-op outside a transaction

    def _full(self, err):
        return isinstance(err, psycopg.errors.DiskFull)

    def close(self):
        with self.lock:
            if self.connection is not None:
                self.connection.close()
