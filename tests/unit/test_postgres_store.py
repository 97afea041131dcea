"""The stores on a real PostgreSQL server (tests/support/postgres_support.py), as evaluators on several pods
use them: one database seen by every process, one claim of a job among racing drivers, migrations
run once, a password never shown, a server restart survived. The stores' own behaviour is tested
on both databases by test_job_store.py and test_reference_sets.py."""
import multiprocessing as mp

import pytest

from theval_mesh.core.inputs import Item
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.pure.errors import NotFound, UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.job_store import MIGRATIONS as JOB_MIGRATIONS
from theval_mesh.stores.job_store import JobSpec, SqlJobStore
from theval_mesh.stores.reference_store import MIGRATIONS as REFERENCE_MIGRATIONS
from theval_mesh.stores.reference_store import Reference, ReferenceStore

SETTINGS = RunSettings(quality="proxy").key()


@pytest.fixture
def url(postgres):
    with postgres.database() as url:
        yield url


def a_job(store: SqlJobStore, n=3):
    return store.create(JobSpec(inputs=[["GT", "gt/"], ["m", "m/"]], settings=SETTINGS),
                        [Item("m", f"v{i}.mp4") for i in range(n)])


def test_two_pods_share_the_jobs_the_sets_and_the_results(url):
    pod_a, pod_b = SqlJobStore(url), SqlJobStore(url)
    refs_a, refs_b = ReferenceStore(url), ReferenceStore(url)
    job = a_job(pod_a)
    pod_a.commit(job.id, VideoResult("m", "v0.mp4", OK, metrics={"lip_sync": 1.5}, settings=SETTINGS))
    assert pod_b.get(job.id).done == 1 and [r.metrics for r in pod_b.results(job.id)] == [{"lip_sync": 1.5}]
    pod_b.request_cancel(job.id)
    assert pod_a.get(job.id).state == "cancelled"
    refs_a.put(Reference("gt", SETTINGS, {"profile": "reference"}, {"lip_sync": 1.0}, {"lip_sync": 1}, 1, 1,
                         owner="alice"), [])
    assert refs_b.get("alice", "gt").owner == "alice" and refs_b.get("alice", "gt").raw == {"lip_sync": 1.0}
    for s in (pod_a, pod_b, refs_a, refs_b):
        s.close()


def _claim(url, job_id, barrier, won):
    store = SqlJobStore(url)
    barrier.wait()
    try:
        store.claim(job_id)
        won.put("claimed")
    except UserError as err:
        won.put(str(err))
    barrier.wait()  # every claimer alive until all have tried: a live driver is not replaced
    store.close()


def test_racing_drivers_claim_a_job_once(url):
    job = a_job(SqlJobStore(url))
    ctx = mp.get_context("spawn")
    barrier, won = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(url, job.id, barrier, won)) for _ in range(4)]
    for p in procs:
        p.start()
    answers = [won.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert answers.count("claimed") == 1, answers
    assert all("already running" in a for a in answers if a != "claimed")


def _open_both(url, barrier):
    barrier.wait()  # all at once, on a database none has set up yet
    SqlJobStore(url).close()
    ReferenceStore(url).close()


def test_a_new_database_opened_by_several_processes_at_once_is_set_up_once(url):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_open_both, args=(url, barrier)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = SqlJobStore(url)
    assert dict(store._sql.rows("SELECT name, version FROM schema_versions")) == {"jobs": len(JOB_MIGRATIONS), "references": len(REFERENCE_MIGRATIONS)}
    store.close()


def test_a_newer_schema_is_refused(url):
    SqlJobStore(url).close()
    store = SqlJobStore(url)
    with store._sql.transaction() as db:
        db.execute("UPDATE schema_versions SET version = 99 WHERE name = 'jobs'")
    store.close()
    with pytest.raises(UserError, match="schema version 99, newer than this theval"):
        SqlJobStore(url)


def test_the_password_never_shows(postgres, url):
    with_password = url.replace("theval@", f"theval:{postgres.password}@")
    store = SqlJobStore(with_password)
    with pytest.raises(NotFound) as missing:
        store.get("job-nope")
    store.close()
    assert postgres.password not in str(missing.value) and "theval:***@127.0.0.1" in str(missing.value)
    wrong = url.replace("theval@", "theval:not-the-password@")
    with pytest.raises(UserError, match="cannot be reached .*password") as refused:
        SqlJobStore(wrong)
    assert "not-the-password" not in str(refused.value)


def test_no_server_is_a_clear_error(postgres):
    from theval_mesh.rpc.launcher import free_port
    with pytest.raises(UserError, match=r"job store postgresql://theval@127.0.0.1:\d+/x cannot be reached"):
        SqlJobStore(f"postgresql://theval@127.0.0.1:{free_port()}/x")


def test_a_server_restart_is_survived(postgres, url):
    from tests.support.postgres_support import wait_until_accepting
    store = SqlJobStore(url)
    job = a_job(store)
    postgres.stop()
    postgres.start()
    wait_until_accepting(postgres)
    assert store.get(job.id).total == 3  # a read on the connection the server closed: made again
    store.commit(job.id, VideoResult("m", "v0.mp4", OK, metrics={}, settings=SETTINGS))
    postgres.stop()
    postgres.start()
    wait_until_accepting(postgres)
    store.finish(job.id, "failed", "a write first")  # a write first: its BEGIN on a new connection
    assert store.get(job.id).done == 1 and store.get(job.id).error == "a write first"
    store.close()
