"""The `theval` console script end to end, on a tiny synthetic kit (real models)."""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import takes_ctrl_c
from tests.support.results_schema import validate_results
from theval_mesh.core.results import VideoResult
from theval_mesh.synth import generate_kit, write_bad_inputs

pytestmark = pytest.mark.slow
THEVAL = str(Path(sys.executable).parent / "theval")


def theval(*args, cwd=None):
    return subprocess.run([THEVAL, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def tiny_kit(tmp_path_factory):
    return generate_kit(tmp_path_factory.mktemp("tiny"), seed=3, n_clips=2, duration_s=3.0, size=256,
                        variants=("frozen_mouth",))


def test_evaluate_writes_every_file_and_resumes(tiny_kit, tmp_path):
    out = tmp_path / "out"
    args = ["evaluate", "--gt", tiny_kit.dir("gt"), "--model", f"frozen={tiny_kit.dir('frozen_mouth')}",
            "--out", out, "--quality", "proxy", "--quiet"]
    first = theval(*args)
    assert first.returncode == 0, first.stderr
    assert "frozen" in first.stdout and "Final" in first.stdout
    for name in ("results.jsonl", "results.csv", "raw_metrics.csv", "leaderboard.csv", "leaderboard.md",
                 "leaderboard.png", "leaderboard.svg", "leaderboard.tex", "run.json", "results.json"):
        assert (out / name).stat().st_size > 0, name
    with open(out / "raw_metrics.csv") as f:
        header = next(csv.reader(f))
    assert header[:9] == ["Model", "Global aesthetic", "Mouth quality", "Face quality", "Lip dynamics",
                          "Head motion dynamics", "Eyebrow dynamics", "Silent lip stability", "Lip sync"]
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4
    record = json.loads(lines[0])
    assert record["provenance"]["quality"]["global_aesthetic"].startswith("proxy:")
    assert record["frames_used"] == record["frames_total"] > 0
    assert set(record["normalised"]) == set(record["metrics"]) and "final_score" in record
    document = json.loads((out / "results.json").read_text())
    validate_results(document)
    frozen = next(e for e in document["leaderboard"] if e["model"] == "frozen")
    low, high = frozen["final"]["ci"]
    assert low <= frozen["final"]["value"] <= high and frozen["rank"] == 1
    assert document["bootstrap"] == {"resamples": 10000, "seed": 0, "level": 0.95, "gt_resampled": True}
    assert "Global aesthetic" in document["proxy_quality"] and document["counts"]["scored"] == 4
    assert "95% CI" in first.stdout and "95% CI" in (out / "leaderboard.md").read_text()
    # the same command again scores nothing new; without --quiet, 4 videos: nothing said of workers
    second = theval(*[a for a in args if a != "--quiet"])
    assert second.returncode == 0 and "workers:" not in second.stderr, second.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 4
    assert (out / "leaderboard.md").read_text().count("frozen") == 1


def test_bad_inputs_fail_alone_and_exit_partial(tiny_kit, tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for clip in tiny_kit.videos("frozen_mouth"):
        shutil.copy(clip, mixed / Path(clip).name)
    bad = write_bad_inputs(mixed)
    # A wrong path in a list fails alone (a whole input with nothing to score is refused before any
    # work: tests/e2e/test_results_always_written.py).
    listed = tmp_path / "gone.txt"
    listed.write_text(f"{tiny_kit.videos('frozen_mouth')[0]}\n{tmp_path / 'does-not-exist'}\n")
    out = tmp_path / "out"
    run = theval("evaluate", "--gt", tiny_kit.dir("gt"), "--model", f"mixed={mixed}",
                 "--model", f"gone={listed}", "--out", out, "--quality", "proxy", "--quiet")
    assert run.returncode == 3, run.stdout + run.stderr  # partial
    rows = {Path(r["video"]).name: r for r in csv.DictReader(open(out / "results.csv"))}
    for clip in tiny_kit.videos("frozen_mouth"):
        assert rows[Path(clip).name]["status"] == "ok"
    assert rows["corrupt.mp4"]["status"] == "failed"
    assert "not a readable video" in rows["not_a_video.mp4"]["reason"]
    # no face in any frame: reference scores it as the reference code does (the paper profile fails it)
    no_face = rows["no_face.mp4"]
    assert no_face["status"] == "ok" and "no face" in no_face["warnings"]
    assert float(no_face["lip_dynamics"]) == 0.0 and float(no_face["eyebrow_dynamics"]) == 0.0
    assert no_face["head_motion"] in ("", "nan", "NaN") and float(no_face["global_aesthetic"]) > 0
    assert rows["no_audio.mp4"]["status"] == "ok" and "no audio" in rows["no_audio.mp4"]["nan_reasons"]
    assert rows["does-not-exist"]["status"] == "failed" and "not found" in rows["does-not-exist"]["reason"]
    screen = run.stdout + run.stderr
    for name in ("corrupt.mp4", "not_a_video.mp4", "does-not-exist"):
        assert f"{name}:" in screen, name
    assert "mixed" in (out / "leaderboard.md").read_text()
    assert len(bad) == 4


def test_demo_runs_on_a_small_kit(tmp_path):
    run = theval("demo", "--out", tmp_path / "demo", "--clips", "1", "--duration", "3", "--quality", "proxy",
                 "--quiet")
    assert run.returncode == 0, run.stderr
    board = (tmp_path / "demo" / "results" / "leaderboard.md").read_text()
    for variant in ("static_head", "audio_shift", "frozen_mouth", "blur", "noise"):
        assert variant in board
    assert "Final score" in run.stdout or "Final" in run.stdout


def test_ctrl_c_keeps_finished_videos_and_rerun_skips_them(tiny_kit, tmp_path):
    import signal
    import sqlite3
    import time
    out = tmp_path / "out"
    args = [THEVAL, "evaluate", "--gt", tiny_kit.dir("gt"), "--model", f"frozen={tiny_kit.dir('frozen_mouth')}",
            "--out", str(out), "--quality", "proxy", "--quiet"]
    proc = subprocess.Popen(takes_ctrl_c(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = out / "results.sqlite"

    def committed() -> list:
        if not db.exists():
            return []
        try:
            with sqlite3.connect(db) as c:
                return [r[0] for r in c.execute("SELECT result FROM results ORDER BY committed")]
        except sqlite3.OperationalError:  # the tables are being created
            return []
    deadline = time.time() + 300
    while time.time() < deadline and len(committed()) < 1:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    done = committed()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert 1 <= len(done) < 4
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(done)} video(s) already scored" in rerun.stdout + rerun.stderr
    assert committed()[:len(done)] == done  # finished ones were not redone
    lines = (out / "results.jsonl").read_text().splitlines()  # each result, with the video's own scores
    assert len(lines) == 4 and sorted(VideoResult.from_json(line).to_json() for line in lines) == sorted(committed())


def test_quality_paper_without_weights_fails_with_one_clear_line(tiny_kit, tmp_path):
    run = subprocess.run([THEVAL, "evaluate", "--gt", tiny_kit.dir("gt"), "--out", str(tmp_path / "o"),
                          "--quality", "paper", "--weights-store", str(tmp_path / "empty-store"), "--workers", "2"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    line = [x for x in run.stderr.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and "empty-store" in line[0] and "theval weights fetch" in line[0]


def test_frame_stride_uses_every_nth_frame(tiny_kit, tmp_path):
    out = tmp_path / "out"
    run = theval("evaluate", "--gt", tiny_kit.dir("gt"), "--out", out, "--quality", "proxy",
                 "--frame-stride", "2", "--quiet")
    assert run.returncode == 0, run.stderr
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        assert r["frames_used"] == (r["frames_total"] + 1) // 2
        assert r["settings"]["frame_stride"] == 2


def test_a_damaged_file_fails_alone_then_is_scored_again_once_fixed(tiny_kit, tmp_path):
    """A file ffmpeg has no decoder for (a fuzzer's find: it used to stop the whole run with a
    traceback) is that video's failure; the next run into the same --out scores it again once it
    is fixed, on Ray this time, and says so."""
    gt = tmp_path / "gt"
    gt.mkdir()
    shutil.copy(tiny_kit.videos("gt")[0], gt / "a.mp4")
    fuzz = Path(__file__).parents[1] / "data" / "fuzz"
    shutil.copy(fuzz / "crash-video-codec-unknown.mp4", gt / "b.mp4")
    args = ["evaluate", "--gt", gt, "--out", tmp_path / "out", "--quality", "proxy", "--single-pass"]
    first = theval(*args, "--inline")
    assert first.returncode == 3, first.stderr  # partial: one video failed
    assert "Traceback" not in first.stderr
    assert f"{gt / 'b.mp4'}: the video stream's codec is unknown to ffmpeg" in first.stdout + first.stderr
    rows = {Path(r["video"]).name: r for r in csv.DictReader(open(tmp_path / "out" / "results.csv"))}
    assert (rows["a.mp4"]["status"], rows["b.mp4"]["status"]) == ("ok", "failed")
    shutil.copy(fuzz / "talking_head.mp4", gt / "b.mp4")  # fixed
    second = theval(*args, "--workers", "1")
    assert second.returncode == 0, second.stderr
    assert ("resuming: 1 video(s) already scored with these settings are reused; 1 that failed before are "
            "scored again") in second.stderr
    rows = {Path(r["video"]).name: r for r in csv.DictReader(open(tmp_path / "out" / "results.csv"))}
    assert (rows["a.mp4"]["status"], rows["b.mp4"]["status"]) == ("ok", "ok")
