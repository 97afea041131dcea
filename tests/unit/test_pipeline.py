"""jobs.pipeline's rules, on jobs that score through a real mesh in this process (tests/support/inprocess_mesh.py)
and a real SQLite job store:
  - a transient failure (a mesh service down: the evaluator answers UNAVAILABLE) puts the video back,
    after a growing pause, up to MAX_ATTEMPTS; past that the job stops "interrupted" with the reason
    and nothing recorded for the video, and a resume scores it;
  - a video's own fault is its failed result, never retried;
  - backpressure (run_ray on a real local Ray): each actor has at most QUEUED_PER_ACTOR videos queued,
    and the driver reads pending items a page at a time.
The transient failures are real: the audio service is stopped mid-job (and started again on its port).
"""
import os
import threading
import time

import prometheus_client
import pytest

from tests.support.video_files import gradient, tone, write_video
from theval_mesh.core.inputs import Item
from theval_mesh.jobs import pipeline
from theval_mesh.jobs.pipeline import QUEUED_PER_ACTOR, JobStopped, run_inline, run_ray
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores import job_store
from theval_mesh.stores.job_store import PAGE, JobSpec, SqlJobStore

SETTINGS = RunSettings(quality="proxy", single_pass=True).key()


@pytest.fixture(scope="module")
def mesh(inprocess_mesh):
    return inprocess_mesh


def clip(mesh, name: str) -> str:
    """A real 64x64, 8-frame clip with 0.32 s of audio, under the mesh's allowed root."""
    return str(write_video(mesh.root / name, gradient(8, 64, 64), audio=tone(0.32)))


def new_job(mesh, store, videos, model="m", workers=1):
    spec = JobSpec(inputs=[["GT", str(mesh.root)]], settings=SETTINGS, workers=workers, mesh=mesh.evaluator.address)
    items = [v if isinstance(v, Item) else Item(model, v) for v in videos]
    return store.create(spec, items).id


@pytest.fixture
def store(tmp_path):
    s = SqlJobStore(tmp_path / "jobs.sqlite")
    yield s
    s.close()


def retries() -> float:
    return prometheus_client.REGISTRY.get_sample_value("theval_job_retries_total") or 0.0


def evaluate_calls(mesh, since: int, video: str) -> list[float]:
    """Arrival times of the Evaluate calls for `video` since the `since`-th call."""
    times = mesh.evaluate_log.times()[since:]
    return [t for t, r in zip(times, mesh.evaluate_log.requests(since)) if r.video.uri == video]


def pauses(n: int) -> list[float]:
    """The pauses before the 2nd, 3rd, ... attempt: FIRST_PAUSE_S doubling up to LAST_PAUSE_S."""
    return [min(pipeline.FIRST_PAUSE_S * 2 ** k, pipeline.LAST_PAUSE_S) for k in range(n)]


def stop_audio_after_first_result(mesh):
    """on_result: the first committed result takes the audio service down (the mesh loses it mid-job);
    later results leave it as it is (a restarted service stays up)."""
    first = []

    def on_result(result):
        if not first:
            first.append(result)
            mesh.leaves["audio"].stop()
    return on_result


@pytest.fixture
def audio_back(mesh):
    """The audio service runs again after the test, whatever it did to it, and the evaluator knows."""
    yield
    if mesh.leaves["audio"].server is None:
        mesh.leaves["audio"].start()
    mesh.wait_serving()


def wait_for(condition, what: str, timeout: float = 120, alive=None):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        assert alive is None or alive.is_alive(), f"the job ended before {what}"
        time.sleep(0.02)


def test_a_video_s_own_fault_is_its_failed_result_never_retried(mesh, store, tmp_path):
    good = clip(mesh, "own-good.mp4")
    corrupt = mesh.root / "own-corrupt.mp4"
    corrupt.write_bytes(b"not a video at all")
    gone = str(mesh.root / "own-gone.mp4")
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(b"x")
    never_opened = Item("m", str(mesh.root / "own-folder"), "path not found: check the folder name")
    job_id = new_job(mesh, store, [good, str(corrupt), gone, str(outside), never_opened])
    since, before = len(mesh.evaluate_log.times()), retries()

    job = run_inline(store, job_id)

    assert (job.state, job.done, job.failed, job.remaining) == ("done", 1, 4, 0)
    reasons = {r.video: r.reason for r in store.results(job_id)}
    assert reasons[good] is None
    assert "not a readable video" in reasons[str(corrupt)]
    assert "file not found" in reasons[gone]
    assert "outside the folders this server may read" in reasons[str(outside)]
    assert reasons[never_opened.video] == "path not found: check the folder name"
    assert retries() == before
    sent = [r.video.uri for r in mesh.evaluate_log.requests(since)]
    assert sorted(sent) == sorted([good, str(corrupt), gone, str(outside)])  # once each; the missing one never


def test_a_transient_failure_retries_after_growing_pauses_until_the_service_is_back(mesh, store, audio_back):
    a, b = clip(mesh, "flaky-a.mp4"), clip(mesh, "flaky-b.mp4")
    job_id = new_job(mesh, store, [a, b])
    since, before = len(mesh.evaluate_log.times()), retries()

    ended = threading.Event()

    def restart_after_two_retries():  # the audio service comes back, as a restarted pod does
        wait_for(lambda: retries() >= before + 2 or ended.is_set(), "two retries")
        if not ended.is_set():
            mesh.leaves["audio"].start()
    restarter = threading.Thread(target=restart_after_two_retries, daemon=True)
    restarter.start()
    try:
        job = run_inline(store, job_id, on_result=stop_audio_after_first_result(mesh))
    finally:
        ended.set()
        restarter.join(timeout=60)

    assert (job.state, job.done, job.failed) == ("done", 2, 0), job.error
    assert {r.video: r.status for r in store.results(job_id)} == {a: "ok", b: "ok"}
    assert len(evaluate_calls(mesh, since, a)) == 1
    calls = evaluate_calls(mesh, since, b)
    assert 3 <= len(calls) <= pipeline.MAX_ATTEMPTS and retries() - before == len(calls) - 1
    gaps = [t1 - t0 for t0, t1 in zip(calls, calls[1:])]
    assert all(gap >= pause for gap, pause in zip(gaps, pauses(len(gaps)))), (gaps, pauses(len(gaps)))


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_past_max_attempts_the_job_stops_interrupted_and_a_resume_scores_the_rest(mesh, store, audio_back,
                                                                                  monkeypatch):
    monkeypatch.setattr(pipeline, "MAX_ATTEMPTS", 3)  # 3 attempts: 0.5 s + 1 s of pauses, not a minute
    a, b = clip(mesh, "down-a.mp4"), clip(mesh, "down-b.mp4")
    job_id = new_job(mesh, store, [a, b])
    since = len(mesh.evaluate_log.times())

    with pytest.raises(JobStopped) as stopped:
        run_inline(store, job_id, on_result=stop_audio_after_first_result(mesh))

    job = store.get(job_id)
    assert (job.state, job.done, job.failed, job.remaining) == ("interrupted", 1, 0, 1)
    assert job.error == str(stopped.value)
    assert job.error.startswith(f"{b} could not be scored after 3 attempts (UNAVAILABLE: ")
    assert "audio service" in job.error and f"theval bulk resume {job_id}" in job.error
    assert [r.video for r in store.results(job_id)] == [a]  # nothing recorded for b
    assert [it.video for _, it in store.pending(job_id)] == [b]
    calls = evaluate_calls(mesh, since, b)
    assert len(calls) == 3
    gaps = [t1 - t0 for t0, t1 in zip(calls, calls[1:])]
    assert all(gap >= pause for gap, pause in zip(gaps, pauses(2))), gaps

    mesh.restart("audio")
    since = len(mesh.evaluate_log.times())
    job = run_inline(store, job_id)  # `theval bulk resume`
    assert (job.state, job.done, job.failed, job.remaining) == ("done", 2, 0, 0)
    assert [r.video.uri for r in mesh.evaluate_log.requests(since)] == [b]  # a is not scored again


@pytest.mark.slow
def test_a_driver_whose_work_blocks_past_the_stale_time_still_reads_running(mesh, store, monkeypatch):
    """The heartbeat does not wait for the work: a video longer to score than STALE_S, or a Ray that
    takes that long to start or reach, is not taken for a dead driver (a status reader, a StreamJob,
    would see "interrupted" and stop following the job). Here the work blocks for 4x the stale time
    (shortened to 1 s, the heartbeat to 0.2 s) in its on_result; a reader on its own connection
    polls the job meanwhile."""
    monkeypatch.setattr(job_store, "STALE_S", 1.0)
    monkeypatch.setattr(pipeline, "HEARTBEAT_S", 0.2)
    job_id = new_job(mesh, store, [clip(mesh, "slow-a.mp4"), clip(mesh, "slow-b.mp4")])
    reader = SqlJobStore(store.path)
    seen, ended = [], threading.Event()

    def watch():
        while not ended.is_set():
            seen.append(reader.get(job_id).state)
            time.sleep(0.05)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        job = run_inline(store, job_id, on_result=lambda result: time.sleep(4 * job_store.STALE_S))
    finally:
        ended.set()
        watcher.join(timeout=10)
        reader.close()

    assert (job.state, job.done) == ("done", 2)
    assert seen.count("running") > 20 and "interrupted" not in seen, sorted(set(seen))


def test_a_cancel_stops_the_video_being_scored_inline_without_waiting_for_it(mesh, store, monkeypatch):
    """The evaluator holds the first Evaluate call (the session mesh's gate, a real server) as a
    long video would keep it; a cancel requested meanwhile reaches the driver at its next
    heartbeat (0.05 s here), which cancels the call itself: the job ends "cancelled" while the call
    is still held, nothing committed, the videos left pending. (Before, the loop only looked at the
    cancel between videos, so the job waited for the call.)"""
    monkeypatch.setattr(pipeline, "HEARTBEAT_S", 0.05)
    job_id = new_job(mesh, store, [clip(mesh, "cancel-a.mp4"), clip(mesh, "cancel-b.mp4")])
    gate = mesh.evaluate_log.gate
    ended: list = []
    gate.clear()
    try:
        driver = threading.Thread(target=lambda: ended.append(run_inline(store, job_id)), daemon=True)
        driver.start()
        wait_for(lambda: mesh.evaluate_log.held == 1, "the first Evaluate call to be held", alive=driver)
        store.request_cancel(job_id)
        driver.join(timeout=60)
        held_at_end = mesh.evaluate_log.held
    finally:
        gate.set()
    assert ended, "the driver waited for the held call"
    job = ended[0]
    assert (job.state, job.done, job.failed, job.remaining) == ("cancelled", 0, 0, 2)
    assert held_at_end == 1  # it ended while the evaluator still held the call: it did not wait for it


def test_a_cancel_stops_an_embedded_video_between_two_frames(store, tmp_path, monkeypatch):
    """Embedded (no mesh): the frame pass looks at the job's cancel per decoded frame. The first
    decoded frame requests the cancel and waits a few heartbeats; the pass stops at the next
    frame, long before the clip's 150."""
    monkeypatch.setattr(pipeline, "HEARTBEAT_S", 0.05)
    video = str(write_video(tmp_path / "long.mp4", gradient(150, 64, 64), audio=tone(6)))
    spec = JobSpec(inputs=[["GT", str(tmp_path)]], settings=SETTINGS, workers=1)
    job_id = store.create(spec, [Item("GT", video)]).id
    decoded = []

    def on_frames(n, total=None):
        if not decoded:
            store.request_cancel(job_id)
            time.sleep(6 * pipeline.HEARTBEAT_S)
        decoded.append(n)
    job = run_inline(store, job_id, on_frames=on_frames)
    assert (job.state, job.done, job.remaining) == ("cancelled", 0, 1)
    assert 1 <= len(decoded) < 150


class RecordingStore(SqlJobStore):
    """A real SqlJobStore that also records its pending() reads: (after, rows returned)."""

    def __init__(self, path):
        super().__init__(path)
        self.reads: list[tuple[int, int]] = []

    def pending(self, job_id, after=-1, limit=PAGE):
        rows = super().pending(job_id, after, limit)
        self.reads.append((after, len(rows)))
        return rows


@pytest.fixture
def ray_env(monkeypatch):
    """What starting a local Ray sets in this process's environment (pipeline._private_ray) is undone after."""
    for var in ("RAY_AUTH_TOKEN", "RAY_AUTH_MODE", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        monkeypatch.setenv(var, os.environ.get(var, ""))  # recorded: restored (or removed) after the test
        monkeypatch.delenv(var)


@pytest.mark.slow  # starts a local Ray (about 5 s) and two actors
def test_ray_actors_queue_at_most_their_share_and_the_driver_reads_a_page_at_a_time(mesh, tmp_path, ray_env):
    """PAGE + 10 videos that do not exist (the evaluator answers each at once: "file not found"),
    2 actors; the evaluator holds the first calls: the driver must stop at QUEUED_PER_ACTOR per
    actor and one page read, not queue or read the whole job."""
    store = RecordingStore(tmp_path / "jobs.sqlite")
    total, workers = PAGE + 10, 2
    job_id = new_job(mesh, store, [str(mesh.root / f"ray-{i:04d}.mp4") for i in range(total)], workers=workers)
    gate = mesh.evaluate_log.gate
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(job=run_ray(store, job_id, workers=workers)))
    gate.clear()
    try:
        runner.start()
        wait_for(lambda: mesh.evaluate_log.held == workers, "each actor's first call", alive=runner)
        in_flight = prometheus_client.REGISTRY.get_sample_value("theval_job_in_flight")
        assert in_flight == workers * QUEUED_PER_ACTOR
        assert store.reads == [(-1, PAGE)]  # one page of the PAGE + 10 pending items
        assert store.get(job_id).done + store.get(job_id).failed == 0
    finally:
        gate.set()
        runner.join(timeout=300)
    assert not runner.is_alive()
    job = outcome["job"]
    assert (job.state, job.failed, job.remaining) == ("done", total, 0)
    assert all("file not found" in r.reason for r in store.results(job_id))
    assert store.reads == [(-1, PAGE), (PAGE - 1, 10), (PAGE + 9, 0)]
    store.close()


@pytest.mark.slow  # Ray's own 30 s wait for its node, then a second start (about 45 s)
def test_a_local_ray_that_did_not_come_up_in_time_is_stopped_and_started_again(ray_env, monkeypatch, capsys):
    """A real local Ray whose first node never registers: the GCS lookup of the first start's
    address is made to fail (what a starved machine did once in CI), so Ray gives up after its 30 s.
    Its processes are killed, the second start comes up and runs a task."""
    import ray
    from ray._private import services

    real_get_node, first = services.get_node, []

    def get_node(gcs_address, node_id):
        first.append(first[0] if first else gcs_address)
        if gcs_address == first[0]:
            raise RuntimeError("injected: this node never registers")
        return real_get_node(gcs_address, node_id)
    monkeypatch.setattr(services, "get_node", get_node)
    try:
        pipeline.start_ray(None, workers=1)
        assert "starting it again (attempt 2 of 3)" in capsys.readouterr().err
        assert ray.get(ray.remote(lambda: 41 + 1).remote()) == 42
        gcs = [c for c in pipeline._descendants().values() if "gcs_server" in c]
        assert len(gcs) == 1, gcs  # the first node's GCS is gone, the second one's runs
    finally:
        ray.shutdown()


class _StandInRay:
    """A stand-in for `ray` (named as such): Ray's Ray Client server failing to start a driver's
    session, seen once in CI on a busy machine, cannot be provoked on demand with a real cluster.
    It raises the given errors from init, one per call, then connects."""

    def __init__(self, *errors):
        self.errors, self.inits, self.shutdowns = list(errors), 0, 0

    def init(self, address, **_):
        self.inits += 1
        if self.errors:
            raise self.errors.pop(0)

    def shutdown(self):
        self.shutdowns += 1


def test_a_local_ray_whose_gcs_never_writes_its_port_is_given_up_after_three_starts_leaving_nothing_running(
        ray_env, monkeypatch, capsys):
    """A real local Ray whose GCS is started but never seen to write its port file in time (Ray's
    own wait is made to time out at once, what a starved machine did once in CI): each of the three
    attempts' processes is stopped, the last one's too, and Ray's own error is what the caller
    gets. Another error is not a startup time limit: no second start."""
    from ray._private import node

    waits = []

    def late(*args, **kwargs):
        waits.append(args)
        raise RuntimeError("Timed out waiting for file /tmp/ray/session_1/gcs_server_port_0a1b (injected)")
    monkeypatch.setattr(node, "wait_for_persisted_port", late)
    with pytest.raises(RuntimeError, match="gcs_server_port"):
        pipeline.start_ray(None, workers=1)
    assert len(waits) == pipeline.LOCAL_START_ATTEMPTS == 3
    assert "starting it again (attempt 3 of 3)" in capsys.readouterr().err
    left = [c for c in pipeline._descendants().values() if any(n in c for n in pipeline.RAY_PROCESSES)]
    assert left == [], left

    def broken(*args, **kwargs):
        waits.append(args)
        raise RuntimeError("some other failure (injected)")
    monkeypatch.setattr(node, "wait_for_persisted_port", broken)
    waits.clear()
    try:
        with pytest.raises(RuntimeError, match="some other failure"):
            pipeline.start_ray(None, workers=1)
        assert len(waits) == 1
    finally:
        pipeline._stop_half_started_ray(set())  # what that start left: not the product's to stop


# What Ray 2.60's proxy sends back when the server process it started for a driver died.
SESSION_FAILED = ConnectionAbortedError("Initialization failure from server:\nTraceback ...\nRuntimeError: Starting Ray "
                                        "client server failed. See ray_client_server_23000.err for detailed logs.\n")


# ... and when the process it forked was already a zombie when it looked at it.
ZOMBIE = ConnectionAbortedError("Initialization failure from server:\nTraceback ...\npsutil.ZombieProcess: PID still "
                                "exists but it's a zombie (pid=17664)\n")


def test_a_ray_client_session_that_failed_to_start_is_tried_again_and_connects(capsys):
    ray = _StandInRay(SESSION_FAILED, ZOMBIE)
    pipeline._connect_ray(ray, "ray://head:10001", pause_s=0)
    assert (ray.inits, ray.shutdowns) == (3, 2)
    assert "attempt 2 of 3" in capsys.readouterr().err


def test_a_ray_address_where_nothing_answers_fails_on_the_first_attempt_and_one_that_keeps_failing_after_three():
    ray = _StandInRay(ConnectionError("ray client connection timeout"))
    with pytest.raises(pipeline.UserError, match="no Ray cluster answers there"):
        pipeline._connect_ray(ray, "ray://nowhere:10001", pause_s=0)
    assert ray.inits == 1
    ray = _StandInRay(*[SESSION_FAILED] * 5)
    with pytest.raises(pipeline.UserError, match="(?s)failed to start a session 3 times.*ray_client_server_23000.err"):
        pipeline._connect_ray(ray, "ray://head:10001", pause_s=0)
    assert ray.inits == pipeline.CONNECT_ATTEMPTS == 3


@pytest.mark.slow  # check() waits for the mesh that is not there
@pytest.mark.parametrize("owner", ["", "alice"])
def test_a_submitted_jobs_error_names_no_server_address_and_the_log_has_it(store, tmp_path, owner, caplog):
    """A job whose mesh does not answer fails before any work. Run from the CLI (no owner), Job.error
    says where the mesh was; submitted to an evaluator by `alice`, Job.error is a line with an id
    and the address goes to the evaluator's log under that id (docs/security.md)."""
    from theval_mesh.rpc.launcher import free_port
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    spec = JobSpec(inputs=[["GT", str(tmp_path)]], settings=SETTINGS, workers=1, mesh=address, owner=owner)
    job_id = store.create(spec, [Item("GT", str(tmp_path / "a.mp4"))]).id
    with pytest.raises(pipeline.UserError, match=address):
        run_inline(store, job_id)
    error = store.get(job_id).error
    assert store.get(job_id).state == "failed"
    if not owner:
        assert address in error
        return
    assert address not in error and str(tmp_path) not in error
    shown, error_id = error.split(" (error ")
    assert shown == "the job could not run on the evaluator's side; the evaluator's log has the details"
    logged = [r.getMessage() for r in caplog.records if error_id.rstrip(")") in r.getMessage()]
    assert len(logged) == 1 and address in logged[0]


def test_an_embedded_video_announces_its_frames_before_the_first(store, tmp_path):
    """The frames bar gets its total: the video's frame count comes (n=0) before its frames."""
    video = str(write_video(tmp_path / "clip.mp4", gradient(30, 64, 64), audio=tone(1.2)))
    spec = JobSpec(inputs=[["GT", str(tmp_path)]], settings=SETTINGS, workers=1)
    job_id = store.create(spec, [Item("GT", video)]).id
    calls = []
    job = run_inline(store, job_id, on_frames=lambda n, total=None: calls.append((n, total)))
    assert job.state == "done"
    assert calls[0] == (0, 30)
    assert [t for _, t in calls[1:]] == [None] * (len(calls) - 1) and sum(n for n, _ in calls) == 30


def test_a_killed_process_counts_as_gone_once_it_is_a_zombie_and_not_before():
    """What the clean-up of a failed Ray start waits on: a live process runs; once killed it runs
    no more, even while it is an unreaped zombie whose /proc entry is still there."""
    import signal
    import subprocess

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert pipeline._running(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pipeline._running(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pipeline._running(child.pid)
        assert os.path.exists(f"/proc/{child.pid}")  # not reaped yet: a zombie
    finally:
        child.kill()
        child.wait()
    assert not pipeline._running(child.pid)
