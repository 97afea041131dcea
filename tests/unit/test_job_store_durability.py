"""The job store under damage and misuse (real SQLite files, real processes): a store truncated or
corrupt is refused, never replaced by an empty one; a full disk keeps what was committed; a
cancel is final; a driver killed on this host frees its job at once."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from theval_mesh.core.inputs import Item
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.job_store import STALE_S, JobSpec, SqlJobStore, StoreFull
from theval_mesh.stores.reference_store import ReferenceStore

SETTINGS = RunSettings(quality="proxy").key()


def spec():
    return JobSpec(inputs=[["GT", "gt/"], ["m", "m/"]], settings=SETTINGS)


def items(n):
    return [Item("m", f"v{i:05d}.mp4") for i in range(n)]


def result(item, padding=0):
    return VideoResult(item.model, item.video, OK, metrics={"lip_sync": 1.0}, settings=SETTINGS,
                       warnings=["x" * padding] if padding else [])


def theval(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "theval_mesh.commands.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, check=False)


def a_used_store(path, jobs=5, per_job=3) -> None:
    store = SqlJobStore(path)
    for j in range(jobs):
        job = store.create(spec(), [Item("m", f"j{j}-v{i}.mp4") for i in range(per_job)])
        for it in store.pending(job.id):
            store.commit(job.id, result(it[1], padding=2000))
    store.close()


def assert_one_line_error(run, *needles):
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr


# ---------------------------------------------------------------------------- 1. damaged store files
def test_a_store_truncated_to_0_bytes_is_refused_not_replaced(tmp_path):
    path = tmp_path / "jobs.sqlite"
    a_used_store(path)
    os.truncate(path, 0)
    with pytest.raises(UserError, match=r"is empty \(0 bytes\) but exists: restore it from a backup, or delete"):
        SqlJobStore(path)
    with pytest.raises(UserError, match="is empty"):
        ReferenceStore(path)  # the evaluator keeps its reference sets in the same file
    assert os.path.getsize(path) == 0  # left as found: a backup can still be put back
    run = theval("bulk", "list", "--store", path)
    assert_one_line_error(run, str(path), "empty (0 bytes)")


def test_a_corrupt_store_is_refused_with_its_path(tmp_path):
    half = tmp_path / "half.sqlite"
    a_used_store(half)
    os.truncate(half, os.path.getsize(half) // 2)  # e.g. a copy cut short
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all " * 500)
    for path in (half, garbage):
        with pytest.raises(UserError, match="is corrupt") as err:
            SqlJobStore(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
        assert_one_line_error(theval("bulk", "list", "--store", path), str(path), "corrupt")


def test_a_new_path_is_still_created_and_a_sound_store_opens(tmp_path):
    path = tmp_path / "jobs.sqlite"
    a_used_store(path)
    assert len(SqlJobStore(path).jobs()) == 5
    assert SqlJobStore(tmp_path / "new.sqlite").jobs() == []
    ReferenceStore(tmp_path / "refs.sqlite").close()


def test_the_evaluator_stops_at_once_on_an_empty_store(tmp_path):
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"")
    deps = [a for d in ("landmarks", "headpose", "quality", "audio") for a in (f"--{d}-addr", "127.0.0.1:9")]
    start = time.monotonic()
    run = theval("serve", "evaluator", "--store", path, "--port", 0, "--metrics-port", 0, "--allow-root", tmp_path,
                 *deps, timeout=90)  # before: NOT_SERVING until killed
    assert_one_line_error(run, str(path), "empty (0 bytes)")
    assert time.monotonic() - start < 60


# ---------------------------------------------------------------------------- 2. disk full
def test_a_full_disk_keeps_what_was_committed_and_says_how_to_go_on(tmp_path):
    path = tmp_path / "jobs.sqlite"
    store = SqlJobStore(path)
    job = store.create(spec(), items(200))
    for _, it in store.pending(job.id)[:5]:
        store.commit(job.id, result(it, padding=3000))
    (pages,) = store._sql.connection.execute("PRAGMA page_count").fetchone()
    store._sql.connection.execute(f"PRAGMA max_page_count = {pages + 4}")  # SQLite answers SQLITE_FULL past it
    committed = 5
    with pytest.raises(StoreFull) as full:
        for _, it in store.pending(job.id):
            store.commit(job.id, result(it, padding=3000))
            committed += 1
    message = str(full.value)
    assert isinstance(full.value, UserError) and "\n" not in message, message
    assert message == (f"the disk holding {path} is full: {committed} results committed so far are kept; free "
                       f"space and run `theval bulk resume {job.id} --store {path}`")
    assert committed > 5 and store.get(job.id).done == committed  # the same connection still reads
    store.close()
    again = SqlJobStore(path)  # space freed (no cap): everything committed is there, and it goes on
    assert len(list(again.results(job.id))) == committed and again.get(job.id).done == committed
    assert again.commit(job.id, result(again.pending(job.id)[0][1]))


def test_a_full_disk_while_creating_a_job_changes_nothing(tmp_path):
    store = SqlJobStore(tmp_path / "jobs.sqlite")
    (pages,) = store._sql.connection.execute("PRAGMA page_count").fetchone()
    store._sql.connection.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreFull, match="is full: nothing was written"):
        store.create(spec(), [Item("m", "v" * 3000 + f"{i}.mp4") for i in range(50)])
    assert store.jobs() == []


# ---------------------------------------------------------------------------- 3. cancel is final
def test_a_job_cancelled_while_queued_is_not_revived_by_its_driver(tmp_path):
    store = SqlJobStore(tmp_path / "jobs.sqlite")
    job = store.create(spec(), items(3))
    assert store.request_cancel(job.id).state == "cancelled"
    with pytest.raises(UserError, match=f"job {job.id} was cancelled"):
        store.claim(job.id)
    assert store.get(job.id).state == "cancelled"
    assert_one_line_error(theval("bulk", "resume", job.id, "--store", store.path), "was cancelled")


def test_a_cancel_requested_before_the_driver_died_stays_a_cancel(tmp_path):
    store = SqlJobStore(tmp_path / "jobs.sqlite")
    job = store.create(spec(), items(3))
    store.claim(job.id)
    store.request_cancel(job.id)
    store._write(lambda db: db.execute("UPDATE jobs SET heartbeat=0 WHERE id=?", (job.id,)))  # its driver died
    assert store.get(job.id).state == "cancelled"
    with pytest.raises(UserError, match="was cancelled"):
        store.claim(job.id)


# ---------------------------------------------------------------------------- 4. dead drivers
DRIVER = """
import sys, time
from theval_mesh.stores.job_store import SqlJobStore
store = SqlJobStore(sys.argv[1])
store.claim(sys.argv[2])
print("claimed", flush=True)
while True:
    store.beat(sys.argv[2])
    time.sleep(0.5)
"""


@pytest.mark.parametrize("reaped", [False, True], ids=["zombie", "reaped"])
def test_a_driver_killed_on_this_host_frees_its_job_at_once(tmp_path, reaped):
    store = SqlJobStore(tmp_path / "jobs.sqlite")
    job = store.create(spec(), items(3))
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(store.path), job.id], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert driver.stdout.readline().strip() == "claimed"
        running = store.get(job.id)
        assert running.state == "running" and f":{driver.pid}:" in running.driver
        with pytest.raises(UserError, match="already running"):
            store.claim(job.id)
        driver.send_signal(signal.SIGKILL)
        if reaped:
            driver.wait()
        else:  # not reaped yet (as under a container's init that does not reap): a zombie is no driver
            while Path(f"/proc/{driver.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
                time.sleep(0.01)
        assert store.get(job.id).state == "interrupted"  # at once, not after STALE_S
        assert store.claim(job.id).state == "running"  # what `theval bulk resume` does
    finally:
        driver.kill()
        driver.wait()


def test_a_reused_pid_is_not_the_driver(tmp_path):
    store = SqlJobStore(tmp_path / "jobs.sqlite")
    job = store.create(spec(), items(3))
    # a live pid of this host (ours), but another process's start time: the driver's pid was reused
    store._write(lambda db: db.execute("UPDATE jobs SET state='running', driver=?, heartbeat=? WHERE id=?",
                                       (f"{socket.gethostname()}:{os.getpid()}:1", time.time(), job.id)))
    assert store.get(job.id).state == "interrupted"
    assert store.claim(job.id).state == "running"


def test_a_driver_on_another_host_is_trusted_until_its_heartbeat_is_stale(tmp_path):
    path = tmp_path / "jobs.sqlite"
    store = SqlJobStore(path)
    job = store.create(spec(), items(3))
    store._write(lambda db: db.execute("UPDATE jobs SET state='running', driver=?, heartbeat=? WHERE id=?",
                                       ("other-host.example:4242:999", time.time() - 10, job.id)))
    assert store.get(job.id).state == "running"
    with pytest.raises(UserError, match=r"already running .*other-host.example.* try again in 2\d s"):
        store.claim(job.id)
    run = theval("bulk", "resume", job.id, "--store", path)
    assert_one_line_error(run, "other-host.example")
    assert re.search(r"try again in \d+ s", run.stderr), run.stderr
    store._write(lambda db: db.execute("UPDATE jobs SET heartbeat=? WHERE id=?", (time.time() - STALE_S - 1, job.id)))
    assert store.get(job.id).state == "interrupted"
