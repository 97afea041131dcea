"""A job's videos fail alone, whatever their fault; only the mesh or a Ray actor failing is
retried; a full disk stops a job cleanly (real models, proxy quality; real SQLite files, a real
mesh for the allowed roots, a real Ray actor SIGKILLed)."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.job_support import run_until
from tests.support.mesh_support import Mesh
from theval_mesh.core.inputs import plan
from theval_mesh.core.results import FAILED, OK
from theval_mesh.jobs.pipeline import run_inline
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.job_store import JobSpec, SqlJobStore, StoreFull
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow
# Durability, not metric values: one FaceMesh pass (--single-pass) keeps these jobs fast.
SETTINGS = RunSettings(quality="proxy", single_pass=True).key()
LONG_NAME = "x" * 300 + ".mp4"  # over the 255-byte limit of a file name


@pytest.fixture(scope="module")
def talking_heads(tmp_path_factory):
    return generate_kit(tmp_path_factory.mktemp("kit"), seed=5, n_clips=2, duration_s=1.5, size=128,
                        variants=()).videos()


@pytest.fixture
def clips(talking_heads, tmp_path):
    """clips(folder, n): n real talking-head videos (hard links) in tmp_path/folder."""
    def make(folder: str, n: int) -> list[str]:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        out = [str(tmp_path / folder / f"c{i}.mp4") for i in range(n)]
        for i, path in enumerate(out):
            os.link(talking_heads[i % len(talking_heads)], path)
        return out
    return make


def test_a_name_too_long_fails_that_video_alone_in_an_inline_run(tmp_path, clips):
    gt = clips("gt", 2)
    listed = tmp_path / "m.txt"
    listed.write_text("\n".join(clips("m", 2) + [str(tmp_path / "m" / LONG_NAME)]) + "\n")
    run = subprocess.run([sys.executable, "-m", "theval_mesh.commands.cli", "evaluate", "--inline", "--quality", "proxy",
                          "--quiet", "--gt", str(tmp_path / "gt"), "--model", f"m={listed}", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 3, run.stdout + run.stderr  # partial: one video failed
    assert "Traceback" not in run.stderr, run.stderr
    assert f"FAILED [m] {tmp_path / 'm' / LONG_NAME}: cannot be read: File name too long" in run.stdout, run.stdout
    assert f"{len(gt) + 2} video(s) scored, 1 failed" in run.stdout, run.stdout


def test_entries_of_a_folder_that_are_no_video_files_fail_with_their_reason_in_an_inline_run(tmp_path, clips):
    """Before: skipped in silence (a FIFO, a link to a device, a looping link, a folder named .mp4)."""
    gt, good = clips("gt", 2), clips("m", 1)
    folder = tmp_path / "m"
    os.mkfifo(folder / "fifo.mp4")
    os.symlink("/dev/null", folder / "null.mp4")
    os.symlink("loop.mp4", folder / "loop.mp4")
    (folder / ".mp4").mkdir()
    run = subprocess.run([sys.executable, "-m", "theval_mesh.commands.cli", "evaluate", "--inline", "--quality", "proxy",
                          "--quiet", "--gt", str(tmp_path / "gt"), "--model", f"m={folder}", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 3, run.stdout + run.stderr  # partial: videos failed
    assert "Traceback" not in run.stderr, run.stderr
    for name, why in (("fifo.mp4", "a named pipe (FIFO), not a video file"),
                      ("null.mp4", "a symbolic link to /dev/null, a character device, not a video file"),
                      ("loop.mp4", "a symbolic link that loops (it leads back to itself), not a video file"),
                      (".mp4", "a folder, not a video file")):
        assert f"FAILED [m] {folder / name}: {why}" in run.stdout, run.stdout
    assert f"{len(gt) + len(good)} video(s) scored, 4 failed" in run.stdout, run.stdout


def test_a_link_outside_the_allowed_roots_fails_that_video_alone_on_the_mesh(tmp_path, clips):
    root = tmp_path / "root"
    good = clips("root/gt", 2)
    os.symlink(clips("outside", 1)[0], root / "gt" / "elsewhere.mp4")  # listed with the job's folder
    (tmp_path / "mesh").mkdir()
    mesh = Mesh(tmp_path / "mesh", roots=[root])
    mesh.start()
    try:
        inputs = [["GT", str(root / "gt")]]
        store = SqlJobStore(tmp_path / "jobs.sqlite")
        job = store.create(JobSpec(inputs=inputs, settings=SETTINGS, mesh=mesh.procs["evaluator"].address),
                           plan([tuple(i) for i in inputs]))
        job = run_inline(store, job.id)  # before: 8 attempts as "transient", then the job interrupted
    finally:
        mesh.stop()
    assert job.state == "done" and (job.done, job.failed) == (len(good), 1), job.error
    failed = [r for r in store.results(job.id) if r.status == FAILED]
    assert [Path(r.video).name for r in failed] == ["elsewhere.mp4"]
    assert "outside the folders this server may read" in failed[0].reason


def test_a_full_disk_stops_the_job_resumably_with_what_it_committed(tmp_path, clips):
    inputs = [["GT", str(Path(clips("gt", 4)[0]).parent)]]
    path = tmp_path / "jobs.sqlite"
    store = SqlJobStore(path)
    job = store.create(JobSpec(inputs=inputs, settings=SETTINGS), plan([tuple(i) for i in inputs]))
    (pages,) = store._sql.connection.execute("PRAGMA page_count").fetchone()
    store._sql.connection.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite answers SQLITE_FULL past it, as a full disk
    with pytest.raises(StoreFull) as full:
        run_inline(store, job.id)
    kept = store.get(job.id)
    assert 0 < kept.done < 4 and kept.state == "interrupted"
    assert str(full.value) == (f"the disk holding {path} is full: {kept.done} results committed so far are kept; "
                               f"free space and run `theval bulk resume {job.id} --store {path}`")
    assert kept.error == str(full.value)  # `theval bulk status` says it too
    store.close()
    again = SqlJobStore(path)  # space freed
    assert [r.status for r in again.results(job.id)] == [OK] * kept.done
    job = run_inline(again, job.id)
    assert job.state == "done" and job.done == 4


def _scorer_actors_of_this_test() -> list[int]:
    """Pids of the Ray workers holding a ScoringWorker that descend from this process (no one else's)."""
    def parent(pid):
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"ray::ScoringWorker" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                continue
            pid = int(entry)
            while pid > 1 and pid != os.getpid():
                pid = parent(pid)
        except OSError:
            continue
        if pid == os.getpid():
            found.append(int(entry))
    return found


def test_an_actor_killed_mid_job_is_replaced_and_its_videos_retried(tmp_path, clips):
    inputs = [["GT", str(Path(clips("gt", 8)[0]).parent)]]
    store = SqlJobStore(tmp_path / "jobs.sqlite")
    job = store.create(JobSpec(inputs=inputs, settings=SETTINGS, workers=1), plan([tuple(i) for i in inputs]))
    runner, outcome = run_until(store, job.id, workers=1, done=1)
    actors = _scorer_actors_of_this_test()
    assert len(actors) == 1, actors
    os.kill(actors[0], signal.SIGKILL)  # its two queued videos fail with it: both go back in the queue
    runner.join(600)
    job = outcome["job"]  # before: KeyError on the second failed call of the dead actor
    assert job.state == "done" and job.done == 8, job.error
