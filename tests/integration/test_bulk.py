"""Bulk jobs on a real Ray instance with real models (proxy quality): hundreds of short clips,
bad videos, the orchestrator SIGKILLed and resumed, a mesh service killed mid-job, flat memory.
Clips are hard links of a few synthetic talking heads (scoring does not care that they repeat)."""
import ipaddress
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import grpc
import psutil
import pytest

from tests.support.job_support import run_until
from tests.support.mesh_support import Mesh, free_port, scrape
from tests.support.ray_support import RayHead
from theval_mesh.core.inputs import plan
from theval_mesh.jobs import job_telemetry
from theval_mesh.jobs.pipeline import run_ray
from theval_mesh.outputs.results_files import write_results
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.stores.job_store import JobSpec, SqlJobStore
from theval_mesh.synth import generate_kit
from theval_mesh.synth.bad_inputs import write_bad_inputs

pytestmark = pytest.mark.slow
# Durability, not metric values: one FaceMesh pass (--single-pass) keeps these jobs fast.
SETTINGS = RunSettings(quality="proxy", single_pass=True).key()
CLIPS = 100  # per model: GT and one variant, plus the bad ones = 205 videos


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    kit = generate_kit(tmp_path_factory.mktemp("src"), seed=21, n_clips=2, duration_s=1.5, size=128,
                       variants=("blur",))
    return {"gt": kit.videos(), "blur": kit.videos("blur")}


def copies(sources, folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        os.link(sources[i % len(sources)], folder / f"c{i:04d}.mp4")
    return folder


@pytest.fixture(scope="module")
def inputs(source, tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    write_bad_inputs(root / "bad", size=128, duration_s=1.5)
    return [["GT", str(copies(source["gt"], root / "gt", CLIPS))],
            ["blur", str(copies(source["blur"], root / "blur", CLIPS))],
            ["bad", str(root / "bad")], ["gone", str(root / "no-such-folder")]]


def new_job(store_path, inputs, workers=2, settings=SETTINGS, **kw):
    store = SqlJobStore(store_path)
    spec = JobSpec(inputs=inputs, settings=settings, workers=workers, **kw)
    return store, store.create(spec, plan([tuple(i) for i in inputs]))


def one_result_per_item(store_path, job_id) -> tuple[int, int, int]:
    """(items, items with exactly one result, results in all)."""
    with sqlite3.connect(store_path) as db:
        per_item = db.execute(
            "SELECT count(r.model) FROM items i LEFT JOIN results r ON r.model=i.model AND r.video=i.video "
            "WHERE i.job=? GROUP BY i.seq", (job_id,)).fetchall()
        total = db.execute("SELECT count(*) FROM results").fetchone()[0]
    return len(per_item), sum(1 for (n,) in per_item if n == 1), total


@pytest.fixture(scope="module")
def finished(inputs, tmp_path_factory):
    """One uninterrupted job over the 205 videos, on 2 Ray workers."""
    path = tmp_path_factory.mktemp("jobs") / "jobs.sqlite"
    store, job = new_job(path, inputs)
    return path, store, run_ray(store, job.id, workers=2)


def test_a_job_of_200_clips_has_exactly_one_result_per_clip(finished):
    path, store, job = finished
    assert job.state == "done" and job.total == 2 * CLIPS + 5
    assert one_result_per_item(path, job.id) == (job.total, job.total, job.total)
    assert job.done + job.failed == job.total and job.remaining == 0


def test_bad_videos_fail_alone_with_their_reason(finished):
    path, store, job = finished
    failed = {Path(r.video).name: r.reason for r in store.results(job.id) if r.status == "failed"}
    assert set(failed) == {"corrupt.mp4", "not_a_video.mp4", "no-such-folder"}
    assert "not found" in failed["no-such-folder"]
    no_face = next(r for r in store.results(job.id) if r.video.endswith("no_face.mp4"))
    assert no_face.status == "ok" and no_face.metrics["lip_dynamics"] == 0.0  # as the reference code
    assert all(failed.values())
    no_audio = next(r for r in store.results(job.id) if r.video.endswith("no_audio.mp4"))
    assert no_audio.status == "ok" and no_audio.nan_reasons["lip_sync"] == "no audio track"
    ok = [r for r in store.results(job.id) if r.model in ("GT", "blur")]
    assert len(ok) == 2 * CLIPS and all(r.status == "ok" for r in ok)
    assert all("metric:lip_sync" in r.timings for r in ok)  # per-metric compute time is recorded


def _theval(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "theval_mesh.commands.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    return address.is_loopback or bool(getattr(address, "ipv4_mapped", None) and address.ipv4_mapped.is_loopback)


def assert_private_ray(driver_pid: int):
    """Every socket the driver and its Ray (GCS, raylet, workers) listen on is on loopback, and the
    GCS refuses a call without Ray's token: no one else can submit code to it."""
    listening = {}
    for proc in [psutil.Process(driver_pid), *psutil.Process(driver_pid).children(recursive=True)]:
        for conn in proc.net_connections("tcp"):
            if conn.status == psutil.CONN_LISTEN:
                listening[(conn.laddr.ip, conn.laddr.port)] = proc.name()
    names = set(listening.values())
    assert {"gcs_server", "raylet"} <= names, listening
    exposed = {a: n for a, n in listening.items() if not _loopback(a[0])}
    assert not exposed, f"listening beyond loopback: {exposed}"
    gcs_port = next(port for (_, port), name in listening.items() if name == "gcs_server")
    with grpc.insecure_channel(f"127.0.0.1:{gcs_port}") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            channel.unary_unary("/ray.rpc.NodeInfoGcsService/GetAllNodeInfo")(b"", timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_an_orchestrator_killed_mid_job_resumes_without_loss_or_duplicates(finished, inputs, tmp_path):
    path = tmp_path / "jobs.sqlite"
    store, job = new_job(path, inputs)
    metrics = free_port()
    # An operator's RAY_AUTH_MODE=disabled does not open the job's local Ray.
    driver = _theval("bulk", "run", job.id, "--store", path, "--metrics-port", metrics,
                     env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    end = time.monotonic() + 300
    while store.get(job.id).done < 40:
        assert driver.poll() is None, driver.stdout.read()
        assert time.monotonic() < end, "the job made no progress"
        time.sleep(0.1)
    assert_private_ray(driver.pid)
    # the orchestrator's own Prometheus metrics, mid-job
    samples = scrape(f"http://127.0.0.1:{metrics}/metrics")
    assert samples[("theval_jobs", frozenset({("state", "running")}))] == 1
    assert samples[("theval_job_videos_total", frozenset({("outcome", "ok")}))] >= 30
    assert samples[("theval_job_progress_videos", frozenset({("job", job.id), ("outcome", "remaining")}))] > 0
    assert samples[("theval_compute_seconds_count", frozenset({("stage", "metric:lip_sync")}))] >= 30
    assert ("theval_job_in_flight", frozenset()) in samples
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    killed = store.get(job.id)
    assert killed.state == "interrupted" and 0 < killed.remaining < job.total
    resumed = _theval("bulk", "resume", job.id, "--store", path, "--wait")
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 3, out  # 3: done, some videos failed (the bad ones)
    assert f"resuming: {killed.done} video(s) already scored with these settings are reused" in out
    if killed.failed:  # the bad videos met before the kill are scored again
        assert f"; {killed.failed} that failed before are scored again" in out
    job = store.get(job.id)
    assert job.state == "done"
    assert one_result_per_item(path, job.id) == (job.total, job.total, job.total)
    # the leaderboard equals the uninterrupted run's
    _, other_store, other = finished
    board = write_results(tmp_path / "resumed", store, job).board
    reference = write_results(tmp_path / "uninterrupted", other_store, other).board
    assert repr([(r.model, r.final, r.scores) for r in board.rows]) == repr([(r.model, r.final, r.scores) for r in reference.rows])


def test_a_mesh_service_killed_mid_job_is_survived_by_retries(source, tmp_path):
    clips = copies(source["gt"], tmp_path / "gt", 24)
    mesh = Mesh(tmp_path, roots=[tmp_path], ports={d: free_port() for d in DEPENDENCIES})
    mesh.start()
    try:
        store, job = new_job(tmp_path / "jobs.sqlite", [["GT", str(clips)]], mesh=mesh.procs["evaluator"].address)
        retries = job_telemetry.JOB_RETRIES._value.get()
        runner, outcome = run_until(store, job.id, workers=2, done=4)
        landmarks = mesh.procs["landmarks"]
        landmarks.kill()  # SIGKILL: the videos in flight lose their landmarks call
        time.sleep(1.0)
        landmarks.start()  # same port
        runner.join(600)
        job = outcome["job"]
        assert job.state == "done" and job.done == 24 and job.failed == 0, job.error
        assert one_result_per_item(tmp_path / "jobs.sqlite", job.id)[:2] == (24, 24)
        assert job_telemetry.JOB_RETRIES._value.get() > retries, "no video was retried"
    finally:
        mesh.stop()


MAXRSS = ("import resource, sys; from theval_mesh.commands.cli import main; code = main(sys.argv[1:]); "
          "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(code)")


def driver_peak_rss_kb(source, tmp_path, n) -> int:
    clips = copies(source["gt"], tmp_path / f"gt{n}", n)
    # every 10th frame: a cheaper video, the same orchestration
    store, job = new_job(tmp_path / f"jobs{n}.sqlite", [["GT", str(clips)]],
                         settings=RunSettings(quality="proxy", frame_stride=10, single_pass=True).key())
    run = subprocess.run([sys.executable, "-c", MAXRSS, "bulk", "run", job.id, "--store", str(store.path)],
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout + run.stderr
    assert store.get(job.id).done == n
    return int(run.stdout.split("MAXRSS_KB")[1].split()[0])


def test_the_orchestrator_memory_stays_flat_with_the_job_size(source, tmp_path):
    """Ten times the videos, not ten times the driver's memory (every 10th frame: about 0.15 s a clip)."""
    small, large = driver_peak_rss_kb(source, tmp_path, 20), driver_peak_rss_kb(source, tmp_path, 200)
    print(f"driver peak RSS: 20 clips {small / 1024:.0f} MB, 200 clips {large / 1024:.0f} MB")
    # measured 276 and 277 MB: 64 MB more would be 360 kB kept per extra clip
    assert large <= small + 64 * 1024, (small, large)


def test_a_job_runs_on_an_existing_ray_cluster_and_leaves_it_running(source, tmp_path):
    """--ray-address: a Ray head started with `ray start` (as KubeRay runs one), not by the job;
    stopped by its own process group (tests/support/ray_support.py), never `ray stop --force`,
    which also killed the Ray of a test running beside this one."""
    head = RayHead(tmp_path / "ray.log", dict(os.environ), secrets.token_hex(32), "--num-cpus=2")
    try:
        head.wait_listening()
        clips = copies(source["gt"], tmp_path / "gt", 6)
        store, job = new_job(tmp_path / "jobs.sqlite", [["GT", str(clips)]], ray_address=head.address)
        # A driver process of its own: Ray reads its token settings once per process.
        run = subprocess.run([sys.executable, "-m", "theval_mesh.commands.cli", "bulk", "run", job.id,
                              "--store", str(store.path)], capture_output=True, text=True, timeout=600,
                             env={**os.environ, **head.driver_env})
        assert run.returncode == 0, run.stdout + run.stderr
        job = store.get(job.id)
        assert job.state == "done" and job.done == 6
        alive = subprocess.run([str(Path(sys.executable).parent / "ray"), "status", f"--address={head.address}"],
                               capture_output=True, text=True, timeout=60, env=head.env)
        assert alive.returncode == 0, alive.stderr  # the cluster outlives the job
    finally:
        head.stop()
