"""The job store (real SQLite files and a real PostgreSQL server): exactly one result per video whatever the commits, resume
by skipping what is committed, results shared by settings, drivers and cancellation."""
import multiprocessing as mp
import os
import sqlite3

import pytest

from theval_mesh.core.inputs import Item
from theval_mesh.core.results import FAILED, OK, VideoResult
from theval_mesh.pure.errors import NotFound, UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.job_store import PAGE, JobSpec, SqlJobStore
from theval_mesh.stores.sqlite import FILE_FORMAT

SETTINGS = RunSettings(quality="proxy").key()


def spec(settings=SETTINGS, **kw):
    return JobSpec(inputs=[["GT", "gt/"], ["m", "m/"]], settings=settings, **kw)


def items(n, model="m"):
    return [Item(model, f"v{i:05d}.mp4") for i in range(n)]


def result(item, status=OK, settings=SETTINGS, value=1.0):
    return VideoResult(item.model, item.video, status, None if status == OK else "corrupt",
                       metrics={"lip_sync": value}, settings=settings)


@pytest.fixture
def store(store_location):
    s = SqlJobStore(store_location)
    yield s
    s.close()


def test_a_job_lists_its_videos_once_and_pages_through_them(store):
    job = store.create(spec(), items(PAGE + 10) + items(3))  # a video listed twice counts once
    assert job.total == PAGE + 10 and job.state == "queued" and job.remaining == job.total
    first = store.pending(job.id)
    assert len(first) == PAGE and [s for s, _ in first] == list(range(PAGE))
    rest = store.pending(job.id, after=first[-1][0])
    assert [it.video for _, it in rest] == [f"v{i:05d}.mp4" for i in range(PAGE, PAGE + 10)]


def test_a_second_commit_of_a_video_changes_nothing(store):
    job = store.create(spec(), items(3))
    it = items(3)[1]
    assert store.commit(job.id, result(it, value=1.0)) is True
    assert store.commit(job.id, result(it, value=2.0)) is False  # e.g. a retry that also finished
    got = [r for r in store.results(job.id)]
    assert len(got) == 1 and got[0].metrics["lip_sync"] == 1.0
    job = store.get(job.id)
    assert (job.done, job.failed, job.remaining) == (1, 0, 2)
    assert [it.video for _, it in store.pending(job.id)] == ["v00000.mp4", "v00002.mp4"]


def test_failed_videos_count_as_failed_and_are_scored_again_by_the_next_pass(store):
    job = store.create(spec(), items(3))
    first = items(3)[0]
    assert store.commit(job.id, result(first, status=FAILED)) is True
    job = store.get(job.id)
    assert (job.done, job.failed, job.remaining) == (0, 1, 2)
    # One pass reads pages after the last seq it read, so it scores the failure once; a later pass
    # (a resume, the same command again) finds it pending: the file may have been fixed since.
    assert [it.video for _, it in store.pending(job.id, after=0)] == ["v00001.mp4", "v00002.mp4"]
    assert [it.video for _, it in store.pending(job.id)] == ["v00000.mp4", "v00001.mp4", "v00002.mp4"]
    assert store.commit(job.id, result(first, status=FAILED)) is True  # failed again: replaced, still one row
    assert (store.get(job.id).done, store.get(job.id).failed) == (0, 1)
    assert store.commit(job.id, result(first, value=3.0)) is True  # fixed: the ok result replaces the failure
    assert store.commit(job.id, result(first, status=FAILED)) is False  # an ok result is never replaced
    (got,) = list(store.results(job.id))
    assert got.status == OK and got.metrics["lip_sync"] == 3.0
    assert (store.get(job.id).done, store.get(job.id).failed) == (1, 0)
    assert [it.video for _, it in store.pending(job.id)] == ["v00001.mp4", "v00002.mp4"]


def test_results_are_shared_by_settings_not_by_job(store):
    a = store.create(spec(), items(4))
    for it in items(4)[:3]:
        store.commit(a.id, result(it))
    b = store.create(spec(), items(5))  # e.g. a re-run with one more video: 3 already scored
    assert store.get(b.id).done == 3 and [it.video for _, it in store.pending(b.id)] == ["v00003.mp4", "v00004.mp4"]
    other = store.create(spec(settings={**SETTINGS, "frame_stride": 2}), items(4))
    assert store.get(other.id).done == 0  # other settings: other numbers


def _commit_all(path, job_id, lo, hi):
    s = SqlJobStore(path)
    for it in items(hi)[lo:]:
        s.commit(job_id, result(it))
    s.close()


def test_concurrent_writers_in_other_processes_never_duplicate(store_location):
    store = SqlJobStore(store_location)
    job = store.create(spec(), items(120))
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_commit_all, args=(store_location, job.id, lo, 120)) for lo in (0, 30, 60)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    job = store.get(job.id)
    assert job.done == 120 and job.remaining == 0
    assert store._sql.rows("SELECT count(*) FROM results") == [(120,)]
    store.close()
    if not store_location.startswith("postgresql:"):
        with sqlite3.connect(store_location) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("PRAGMA user_version").fetchone()[0] == FILE_FORMAT  # the file format, not the schema


def test_a_driver_claims_a_job_once_and_a_dead_driver_means_interrupted(store, monkeypatch):
    job = store.create(spec(), items(2))
    claimed = store.claim(job.id)
    assert claimed.state == "running" and f":{os.getpid()}:" in claimed.driver  # host:pid:start time
    with pytest.raises(UserError, match="already running"):
        store.claim(job.id)
    assert store.beat(job.id) is False
    # a driver that stopped beating long ago is no longer running
    store._write(lambda db: db.execute("UPDATE jobs SET heartbeat=0 WHERE id=?", (job.id,)))
    assert store.get(job.id).state == "interrupted"
    assert store.claim(job.id).state == "running"  # resumable
    store.request_cancel(job.id)
    assert store.beat(job.id) is True  # the driver sees the cancel at its next heartbeat
    store.finish(job.id, "done")
    assert store.get(job.id).state == "done" and store.get(job.id).finished is not None


def test_unknown_jobs_and_newer_schemas_are_refused_clearly(store, tmp_path):
    with pytest.raises(NotFound, match="no job 'job-nope'"):
        store.get("job-nope")
    path = tmp_path / "new.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {FILE_FORMAT + 1}")
    with pytest.raises(UserError, match="newer than this theval"):
        SqlJobStore(path)
    with pytest.raises(UserError, match="does not exist"):
        SqlJobStore(tmp_path / "no" / "such" / "dir" / "jobs.sqlite")
