"""Jobs submitted to the evaluator in plain Python (evaluator.submitted_jobs; real SQLite, real folders, a
real process as a driver that dies): what a submission must name, the limits, and each caller
seeing only its own jobs. Jobs that run to the end: tests/integration/test_mesh_jobs.py."""
import logging
import re
import subprocess
import sys
import threading
import time

import pytest

from theval_mesh.core.inputs import Item
from theval_mesh.evaluator.submitted_jobs import JOB_METHODS, SubmittedJobs
from theval_mesh.pure.errors import AccessDenied, NotFound, Overloaded, UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc.security import ClientSecurity, Tokens, job_identity
from theval_mesh.stores.job_store import JobSpec

SETTINGS = RunSettings(quality="proxy")


@pytest.fixture
def root(tmp_path):
    (tmp_path / "videos" / "gt").mkdir(parents=True)
    (tmp_path / "videos" / "m").mkdir()
    return (tmp_path / "videos").resolve()


@pytest.fixture
def jobs(tmp_path, root):
    j = SubmittedJobs(tmp_path / "store.sqlite", (str(root),), workers=2, max_workers=4, max_jobs=2)
    yield j
    j.close()


def a_job(jobs, owner="alice"):
    spec = JobSpec(inputs=[["GT", "/v/gt"]], settings=SETTINGS.key(), owner=owner)
    return jobs.store.create(spec, [Item("GT", "/v/gt/a.mp4"), Item("GT", "/v/gt/b.mp4")])


def test_inputs_name_the_gt_first_and_stay_under_the_roots(jobs, root, tmp_path):
    assert jobs.inputs("", str(root / "gt"), [("m", f"file://{root}/m")]) == [["GT", str(root / "gt")],
                                                                             ["m", str(root / "m")]]
    assert jobs.inputs("reference", str(root / "gt"), [])[0] == ["reference", str(root / "gt")]
    with pytest.raises(UserError, match="gt: give a folder, a video or a .txt list"):
        jobs.inputs("", "", [])
    with pytest.raises(UserError, match="model 'm': give a folder"):
        jobs.inputs("", str(root / "gt"), [("m", "")])
    with pytest.raises(UserError, match=r"model name 'bad\|name'"):
        jobs.inputs("", str(root / "gt"), [("bad|name", str(root / "m"))])
    with pytest.raises(UserError, match="gt_name ' GT'"):
        jobs.inputs(" GT", str(root / "gt"), [])
    with pytest.raises(AccessDenied, match="outside the folders this server may read"):
        jobs.inputs("", str(tmp_path), [])


def test_workers_and_jobs_at_once_are_capped_before_anything_is_stored(jobs, root):
    inputs = jobs.inputs("", str(root / "gt"), [])
    with pytest.raises(UserError, match="workers must be at least 1, not -1"):
        jobs.submit(inputs, SETTINGS, -1, "alice")
    with pytest.raises(Overloaded, match="workers 5 is over this evaluator's limit of 4 per job"):
        jobs.submit(inputs, SETTINGS, 5, "alice")
    jobs.max_jobs = 0
    with pytest.raises(Overloaded, match="0 jobs are running, this evaluator's limit"):
        jobs.submit(inputs, SETTINGS, 0, "alice")  # 0: the default number of workers
    assert jobs.store.jobs() == []


def test_a_caller_sees_and_cancels_only_its_own_jobs(jobs):
    job = a_job(jobs)
    assert jobs.get(job.id, "alice").total == 2
    for who, job_id in (("bob", job.id), ("alice", "job-nope")):
        with pytest.raises(NotFound, match=f"no job '{job_id}' of yours") as err:
            jobs.get(job_id, who)
        assert jobs.store.path not in str(err.value)
        with pytest.raises(NotFound):
            jobs.cancel(job_id, who)
        with pytest.raises(NotFound):
            next(jobs.updates(job_id, who, lambda: True))
    assert jobs.store.get(job.id).state == "queued"
    assert jobs.cancel(job.id, "alice").state == "cancelled"  # not running: at once


def test_updates_follow_a_job_to_its_end_and_stop_with_the_caller(jobs):
    job = a_job(jobs)
    assert list(jobs.updates(job.id, "alice", lambda: False)) == []
    follow = jobs.updates(job.id, "alice", lambda: True)
    assert next(follow).state == "queued"
    jobs.store.finish(job.id, "done")
    assert [j.state for j in follow] == ["done"]  # and it ends


def test_a_driver_that_dies_before_the_end_leaves_its_job_interrupted_with_why(jobs, tmp_path, caplog):
    job = a_job(jobs)
    log_file = tmp_path / "driver.log"
    with open(log_file, "w") as out:
        driver = subprocess.Popen([sys.executable, "-c", "print('ray: no space left in /srv/x'); raise SystemExit(3)"],
                                  stdout=out)
    jobs._drivers[job.id] = driver
    with caplog.at_level(logging.ERROR, logger="theval.jobs"):
        jobs._watch(job.id, driver, log_file)
    after = jobs.store.get(job.id)
    # The caller sees the exit code and an id, never the driver's output (paths, hosts, tracebacks) ...
    error_id = re.fullmatch(r"its driver exited with code 3; see the evaluator's log \(error ([0-9a-f]{8})\)",
                            after.error)[1]
    assert after.state == "interrupted"
    # ... which the evaluator's log keeps under that id.
    assert any(error_id in r.getMessage() and "ray: no space left in /srv/x" in r.getMessage() for r in caplog.records)
    assert jobs._drivers == {}  # its slot is free


def test_jobs_workers_dial_the_advertised_address_else_the_bound_one(jobs):
    for advertised, host, address in ((None, "127.0.0.1", "127.0.0.1:5"), (None, "0.0.0.0", "127.0.0.1:5"),
                                      (None, "::", "127.0.0.1:5"), (None, "10.0.0.7", "10.0.0.7:5"),
                                      ("10.1.2.3", "0.0.0.0", "10.1.2.3:5"), ("fd00::7", "::", "[fd00::7]:5")):
        jobs.advertise_host = advertised
        jobs.bound(host, 5)
        assert jobs.address == address, (advertised, host)


def bearer(token):
    return [("authorization", f"Bearer {token}")]


def test_a_jobs_own_token_opens_the_api_while_its_driver_runs_and_nothing_after(jobs, tmp_path):
    """Each job gets a token of its own (its actors carry it, on an external Ray through the
    cluster's metadata), named for the job and scoped to its scoring calls, revoked when its
    driver exits; the callers' tokens stay."""
    caller = "c" * 32
    tokens = Tokens.parse(f"alice {caller}", "test")
    jobs.trust_drivers(ClientSecurity(), tokens)
    job, second = a_job(jobs), a_job(jobs)
    token, other = jobs._issue_token(job.id), jobs._issue_token(second.id)
    assert token != other
    assert tokens.lookup(bearer(token)) == (job_identity(job.id), JOB_METHODS)
    assert tokens.lookup(bearer(other)) == (job_identity(second.id), JOB_METHODS)
    assert tokens.lookup(bearer(caller)) == ("alice", None)  # a person's token: every method
    driver = subprocess.Popen([sys.executable, "-c", "pass"])
    jobs._drivers[job.id] = driver
    jobs._watch(job.id, driver, tmp_path / "driver.log", token)
    assert tokens.identity(bearer(token)) is None
    assert tokens.identity(bearer(other)) == job_identity(second.id) and tokens.identity(bearer(caller)) == "alice"
    jobs.trust_drivers(ClientSecurity(), None)  # an API without tokens: none issued
    assert jobs._issue_token(job.id) is None


def test_a_jobs_token_scores_its_own_jobs_videos_while_it_runs_only(jobs):
    job, other = a_job(jobs), a_job(jobs)
    who = job_identity(job.id)
    jobs.check_scope(who, "GT", "/v/gt/a.mp4")  # its own video
    jobs.check_scope("alice", "m", "/anything/else.mp4")  # not a job's token: the other checks decide
    for uri, reference in (("/v/gt/c.mp4", ""), ("/v/gt/a.mp4", "gt")):  # another video; a GT set
        with pytest.raises(AccessDenied, match="submitted job's token"):
            jobs.check_scope(who, "GT", uri, reference)
    jobs.store.finish(job.id, "cancelled")
    with pytest.raises(AccessDenied, match="while it runs"):  # its job is over
        jobs.check_scope(who, "GT", "/v/gt/a.mp4")
    jobs.check_scope(job_identity(other.id), "GT", "/v/gt/a.mp4")


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_a_job_is_resumed_only_when_no_driver_runs_it(jobs):
    from theval_mesh.pure.errors import NotResumable
    done, cancelled, running = a_job(jobs), a_job(jobs), a_job(jobs)
    jobs.store.finish(done.id, "done")
    jobs.store.request_cancel(cancelled.id)
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    jobs._drivers[running.id] = driver
    try:
        for job, why in ((done, "is done"), (cancelled, "was cancelled"), (running, "is already running")):
            with pytest.raises(NotResumable, match=why):
                jobs.resume(job.id, "alice")
        with pytest.raises(NotFound):  # another caller's job
            jobs.resume(done.id, "bob")
    finally:
        driver.kill()
        driver.wait()
    # its driver exited and its watcher has not seen it yet: that slot is the one being replaced
    jobs.max_jobs = 1
    jobs._check_slots(replacing=running.id)
    with pytest.raises(Overloaded):
        jobs._check_slots()


def test_a_killed_driver_is_resumed_while_its_watcher_still_waits_on_it(jobs, monkeypatch):
    """The job's watcher blocks in wait() on its driver, and then Popen.poll() answers None (still
    running) even once the driver is dead: resume() must not refuse the job as "already running".
    The store still says running (the watcher records the end later): the job is queued again all
    the same, with no error."""
    job = a_job(jobs)
    claim = (f"from theval_mesh.stores.job_store import SqlJobStore; SqlJobStore({jobs.store.path!r}).claim({job.id!r}); "
             "import time; time.sleep(60)")
    driver = subprocess.Popen([sys.executable, "-c", claim])
    jobs._drivers[job.id] = driver
    deadline = time.monotonic() + 60
    while jobs.store.get(job.id).state != "running":  # the driver has claimed it
        assert time.monotonic() < deadline and driver.poll() is None
        time.sleep(0.1)
    watcher = threading.Thread(target=driver.wait, daemon=True)  # as _watch does
    watcher.start()
    time.sleep(0.2)  # the watcher now holds the driver's waitpid lock
    driver.kill()
    started = []
    monkeypatch.setattr(jobs, "_start", lambda job_id, workers, how: started.append((job_id, how)))
    resumed = jobs.resume(job.id, "alice")
    assert (resumed.state, resumed.error) == ("queued", None)
    watcher.join(10)
    assert started == [(job.id, "resumed")]


def test_drivers_that_outlived_an_evaluators_restart_hold_their_slots(jobs):
    """A restarted evaluator has no handle on the drivers its earlier run started; they go on, on
    this host, and --max-jobs counts them from the store (their claim names host and pid)."""
    job = a_job(jobs)
    jobs.store.claim(job.id)  # as its driver does: here, this live process on this host
    assert jobs._drivers == {}
    jobs.max_jobs = 1
    with pytest.raises(Overloaded, match="1 jobs are running, this evaluator's limit"):
        jobs._check_slots()
    jobs._check_slots(replacing=job.id)
    jobs.store.finish(job.id, "done")
    jobs._check_slots()  # its driver is done: the slot is free
