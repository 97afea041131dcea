"""The result cache on real models and real runs (proxy quality): a second evaluation of the same GT
with a new model folder scores only the new folder's videos, reused results are the results a run
without the cache gives, a changed file is scored again; the CLI says what it reused, and the
mesh's evaluator reuses what it scored (its /metrics count the lookups)."""
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mesh_support import Mesh, sample, scrape
from theval_mesh import Client, evaluate

pytestmark = pytest.mark.slow
THEVAL = str(Path(sys.executable).parent / "theval")


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in
                                        ((a[k], b[k]) for k in a))


@pytest.fixture(scope="module")
def folders(kit, tmp_path_factory):
    """A GT of 2 clips and two model folders of 2 clips each, copies (a test changes one)."""
    root = tmp_path_factory.mktemp("cache-inputs")
    for folder, variant in (("gt", "gt"), ("a", "blur"), ("b", "static_head")):
        (root / folder).mkdir()
        for clip in ("clip_00", "clip_01"):
            shutil.copy(Path(kit.out_dir) / variant / f"{clip}.mp4", root / folder / f"{clip}.mp4")
    return root


def by_video(results) -> dict:
    return {(r.model, Path(r.video).name): r for r in results}


def test_a_new_model_folder_costs_only_its_own_videos(folders, tmp_path):
    cache = str(tmp_path / "cache.sqlite")
    gt = str(folders / "gt")
    first = evaluate(gt, {"A": str(folders / "a")}, tmp_path / "first", quality="proxy", cache=cache, progress=False)
    assert not any(r.reused for r in first.results)
    second = evaluate(gt, {"B": str(folders / "b")}, tmp_path / "second", quality="proxy", cache=cache,
                      progress=False)
    reused = {(r.model, Path(r.video).name) for r in second.results if r.reused}
    assert reused == {("GT", "clip_00.mp4"), ("GT", "clip_01.mp4")}  # B's videos were scored
    # What was reused is what a run without the cache computes, bit for bit.
    fresh = evaluate(gt, {"B": str(folders / "b")}, tmp_path / "fresh", quality="proxy", cache=False, progress=False)
    fresh_by, second_by = by_video(fresh.results), by_video(second.results)
    assert fresh_by.keys() == second_by.keys()
    for key, r in fresh_by.items():
        assert same(r.metrics, second_by[key].metrics), key
        assert r.trace.keys() == second_by[key].trace.keys()
    assert [(row.model, row.final) for row in fresh.leaderboard] == \
        [(row.model, row.final) for row in second.leaderboard]
    # The results keep their own names: the same bytes under another model's name are that model's.
    assert all(str(folders) in r.video for r in second.results)


def test_a_changed_file_is_scored_again(folders, kit, tmp_path):
    cache = str(tmp_path / "cache.sqlite")
    gt = tmp_path / "gt"
    shutil.copytree(folders / "gt", gt)
    evaluate(str(gt), {}, tmp_path / "one", quality="proxy", cache=cache, progress=False)
    shutil.copy(Path(kit.out_dir) / "noise" / "clip_00.mp4", gt / "clip_00.mp4")  # new bytes, same name
    again = evaluate(str(gt), {}, tmp_path / "two", quality="proxy", cache=cache, progress=False)
    assert {Path(r.video).name: r.reused for r in again.results} == {"clip_00.mp4": False, "clip_01.mp4": True}


def test_the_cli_says_what_it_reused_and_the_cache_can_be_cleared(folders, tmp_path):
    cache = str(tmp_path / "cache.sqlite")
    run = [THEVAL, "evaluate", "--gt", str(folders / "gt"), "--quality", "proxy", "--cache", cache]
    first = subprocess.run(run + ["--out", str(tmp_path / "1")], capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    assert "reused" not in first.stderr
    second = subprocess.run(run + ["--out", str(tmp_path / "2")], capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr
    assert "result cache: 2 video(s) reused" in second.stderr and "0 scored now" in second.stderr
    off = subprocess.run(run + ["--out", str(tmp_path / "3"), "--no-cache"], capture_output=True, text=True,
                         timeout=900)
    assert off.returncode == 0 and "reused" not in off.stderr
    status = subprocess.run([THEVAL, "cache", "status", "--cache", cache], capture_output=True, text=True)
    assert "2 result(s) of 2 video file(s)" in status.stdout, status.stdout + status.stderr
    clear = subprocess.run([THEVAL, "cache", "clear", "--cache", cache], capture_output=True, text=True)
    assert "2 result(s) removed" in clear.stdout
    third = subprocess.run(run + ["--out", str(tmp_path / "4")], capture_output=True, text=True, timeout=900)
    assert third.returncode == 0 and "reused" not in third.stderr


def test_the_mesh_evaluator_reuses_what_it_scored(folders, tmp_path):
    clip = folders / "gt" / "clip_00.mp4"
    mesh = Mesh(tmp_path, roots=[folders], env={"THEVAL_CACHE": str(tmp_path / "on")}).start()
    try:
        with Client(mesh.procs["evaluator"].address, timeout_s=600) as client:
            first = client.evaluate(str(clip))
            second = client.evaluate(clip.read_bytes(), name="upload.mp4")  # the same bytes, uploaded
        assert same(first.metrics, second.metrics)
        samples = scrape(mesh.procs["evaluator"].metrics_url)
        assert sample(samples, "theval_result_cache_lookups_total", outcome="miss") == 1
        assert sample(samples, "theval_result_cache_lookups_total", outcome="hit") == 1
        assert second.video == "upload.mp4"
    finally:
        mesh.stop()


def test_with_everything_cached_no_ray_is_started(folders, tmp_path, monkeypatch):
    from theval_mesh.jobs import pipeline
    cache = str(tmp_path / "cache.sqlite")
    evaluate(str(folders / "gt"), {}, tmp_path / "fill", quality="proxy", cache=cache, progress=False)
    started = []
    real = pipeline.start_ray
    monkeypatch.setattr(pipeline, "start_ray", lambda *a, **k: (started.append(a), real(*a, **k)))  # a spy: records, then the real start
    again = evaluate(str(folders / "gt"), {}, tmp_path / "again", quality="proxy", cache=cache, workers=2,
                     progress=False)
    assert all(r.reused for r in again.results) and len(again.results) == 2
    assert started == []


def test_a_bulk_job_reuses_what_an_evaluation_scored(folders, tmp_path):
    cache = str(tmp_path / "cache.sqlite")
    evaluate(str(folders / "gt"), {}, tmp_path / "eval", quality="proxy", cache=cache, progress=False)
    store = str(tmp_path / "jobs.sqlite")
    run = subprocess.run([THEVAL, "bulk", "submit", "--gt", str(folders / "gt"), "--model", f"A={folders / 'a'}",
                          "--quality", "proxy", "--store", store, "--cache", cache, "--wait"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    assert "result cache: 2 video(s) reused" in run.stderr and "2 scored now" in run.stderr
