"""A real PostgreSQL server for the tests (Debian's `postgresql` package, installed by ./dev test):
a cluster of its own in a temporary folder, on loopback, password (SCRAM) authentication, run as
the `postgres` user when the tests run as root (PostgreSQL refuses root)."""
import glob
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg

USER = "theval"


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"{name} not found: install Debian's postgresql package (./dev test does)")
    return found[-1]


class PostgresServer:
    def __init__(self, port: int):
        self.port = port
        self.folder = Path(tempfile.mkdtemp(prefix="theval-pg-"))
        self.data = self.folder / "data"
        self.password = secrets.token_urlsafe(16)
        self.passfile = self.folder / "pgpass"
        self.passfile.write_text(f"127.0.0.1:{port}:*:{USER}:{self.password}\n")
        self.passfile.chmod(0o600)  # libpq ignores a passfile others can read
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.folder, "postgres")
            self.folder.chmod(0o700)
        pwfile = self.folder / "pw"
        pwfile.write_text(self.password)
        if self.as_postgres:
            shutil.chown(pwfile, "postgres")
        self._run(_bin("initdb"), "-D", str(self.data), "-U", USER, "--auth=scram-sha-256", f"--pwfile={pwfile}",
                  "-E", "UTF8", "--no-sync")
        pwfile.unlink()

    def _run(self, *cmd, check=True):
        if self.as_postgres:
            cmd = ("runuser", "-u", "postgres", "--") + cmd
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def start(self):
        # fsync off: a test server, not a durability test of PostgreSQL itself.
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", str(self.folder / "log"),
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off", "start")

    def stop(self):
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-w", "-m", "fast", "stop", check=False)

    def url(self, database: str = "postgres") -> str:
        """Without the password: libpq reads it from PGPASSFILE, as the product documents."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def admin(self):
        return psycopg.connect(self.url(), password=self.password, autocommit=True)

    @contextmanager
    def database(self):
        """A fresh database for one test, dropped after it."""
        name = "t_" + uuid.uuid4().hex[:12]
        with self.admin() as db:
            db.execute(f"CREATE DATABASE {name}")
        try:
            yield self.url(name)
        finally:
            with self.admin() as db:
                db.execute(f"DROP DATABASE {name} WITH (FORCE)")

    def close(self):
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def wait_until_accepting(server: PostgresServer, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            server.admin().close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
