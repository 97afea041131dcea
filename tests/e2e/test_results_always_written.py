"""A run never ends without its results, and a GT that cannot normalise a metric is refused before
the work: replayed as a new user would, with `theval evaluate` in this process on a tiny real kit
(real MediaPipe and Silero, the proxy quality), then the files and the store read back."""
import csv
import json
import math
import shutil
from pathlib import Path

import pytest

from tests.support.results_schema import validate_results
from theval_mesh import write_report
from theval_mesh.commands.cli import main
from theval_mesh.core import aggregate
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.exit_codes import EXIT_NOT_RANKED, EXIT_USAGE
from theval_mesh.stores.job_store import SqlJobStore
from theval_mesh.synth import generate_kit
from theval_mesh.synth.mp4 import without_audio

pytestmark = pytest.mark.slow  # a tiny kit, scored a few times inline

PER_VIDEO = ("results.jsonl", "results.csv", "raw_metrics.csv", "results.json")
NEED_A_BOARD = ("leaderboard.csv", "leaderboard.md", "leaderboard.png", "run.json")
AUDIO_METRICS = ["Silent lip stability", "Lip sync"]


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return generate_kit(tmp_path_factory.mktemp("kit"), seed=5, n_clips=2, duration_s=2.0, size=160,
                        variants=("frozen_mouth",))


@pytest.fixture(scope="module")
def silent(kit, tmp_path_factory):
    """The kit's GT and model folders again, video only."""
    root = tmp_path_factory.mktemp("silent")
    for variant in ("gt", "frozen_mouth"):
        for video in kit.videos(variant):
            without_audio(Path(video), root / variant / Path(video).name)
    return root


def evaluate(capsys, gt, model, out, *extra):
    code = main(["evaluate", "--gt", str(gt), "--model", f"frozen={model}", "--out", str(out), "--inline",
                 "--quality", "proxy", "--quiet", *extra])
    return code, capsys.readouterr()


def stored(out: Path) -> dict:
    """(model, file name) -> raw metrics, as the job store holds them."""
    store = SqlJobStore(out / "results.sqlite")
    try:
        (job,) = store.jobs()
        return {(r.model, Path(r.video).name): r.metrics for r in store.results(job.id)}
    finally:
        store.close()


def same_as_store(out: Path):
    """results.jsonl and results.csv hold the store's per-video values, to the last digit."""
    expected = stored(out)
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {(r["model"], Path(r["video"]).name) for r in lines} == set(expected)
    for r in lines:
        for key, value in expected[(r["model"], Path(r["video"]).name)].items():
            got = r["metrics"][key]
            assert (got is None and math.isnan(value)) or got == value, (r["video"], key)
    with open(out / "results.csv") as f:
        for row in csv.DictReader(f):
            for key, value in expected[(row["model"], Path(row["video"]).name)].items():
                assert (row[key] == "" and math.isnan(value)) or float(row[key]) == value


def test_a_gt_without_audio_is_refused_before_any_work(kit, silent, tmp_path, capsys):
    out = tmp_path / "out"
    code, shown = evaluate(capsys, silent / "gt", kit.dir("frozen_mouth"), out)
    assert code == EXIT_USAGE
    (line,) = shown.err.strip().splitlines()
    assert "has an audio track" in line and "Silent lip stability and Lip sync" in line
    assert "--partial-score" in line and "add the audio" in line
    assert not out.exists()  # nothing started: no store, no model loaded for it


def test_a_partial_score_is_labelled_on_every_output(kit, silent, tmp_path, capsys):
    out = tmp_path / "out"
    code, shown = evaluate(capsys, silent / "gt", kit.dir("frozen_mouth"), out, "--partial-score")
    assert code in (0, 3), shown.err
    assert "warning: PARTIAL Final score over 6 of 8 metrics" in shown.out
    document = json.loads((out / "results.json").read_text())
    validate_results(document)
    assert document["left_out"] == AUDIO_METRICS and document["not_ranked"] is None
    assert any("NOT comparable with a full THEval Final score" in w for w in document["warnings"])
    frozen = next(e for e in document["leaderboard"] if e["model"] == "frozen")
    assert frozen["rank"] == 1 and frozen["final"]["value"] is not None
    assert all(frozen["normalised"][m]["value"] is None for m in AUDIO_METRICS)
    assert "PARTIAL Final score" in (out / "leaderboard.md").read_text()
    with open(out / "leaderboard.csv") as f:
        notes = {row["Model"]: row["Note"] for row in csv.DictReader(f)}
    assert "partial Final score: Silent lip stability, Lip sync left out" in notes["frozen"]
    report = write_report(out, thumbnails=0, progress=False).read_text()
    assert "PARTIAL Final score: Silent lip stability, Lip sync left out" in report
    assert '<tr class="published">' not in report  # never beside the published full scores
    same_as_store(out)


def test_a_gt_with_audio_on_some_clips_only_gives_a_full_score(kit, silent, tmp_path, capsys):
    gt = tmp_path / "gt"
    gt.mkdir()
    videos = kit.videos("gt")
    shutil.copy(videos[0], gt / Path(videos[0]).name)
    without_audio(Path(videos[1]), gt / Path(videos[1]).name)
    out = tmp_path / "out"
    code, shown = evaluate(capsys, gt, kit.dir("frozen_mouth"), out)
    assert code in (0, 3), shown.err
    document = json.loads((out / "results.json").read_text())
    assert document["left_out"] == [] and document["leaderboard"][1]["rank"] == 1
    assert document["leaderboard"][0]["raw"]["Lip sync"]["videos"] == 1  # the GT's mean over its one track


def test_a_model_without_audio_is_scored_and_unranked_with_its_reason(kit, silent, tmp_path, capsys):
    out = tmp_path / "out"
    code, shown = evaluate(capsys, kit.dir("gt"), silent / "frozen_mouth", out)
    assert code == 3, shown.err
    for name in PER_VIDEO + NEED_A_BOARD:
        assert (out / name).is_file(), name
    document = json.loads((out / "results.json").read_text())
    frozen = next(e for e in document["leaderboard"] if e["model"] == "frozen")
    assert frozen["rank"] is None and "no video gave a value for Silent lip stability, Lip sync" in frozen["note"]
    same_as_store(out)


def test_a_failure_while_ranking_keeps_the_per_video_results(kit, tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("injected into the aggregation step")
    monkeypatch.setattr(aggregate, "ranked", broken)
    out = tmp_path / "out"
    code, shown = evaluate(capsys, kit.dir("gt"), kit.dir("frozen_mouth"), out)
    assert code == EXIT_NOT_RANKED
    (line,) = shown.err.strip().splitlines()
    assert line.startswith("error: no leaderboard: forming the leaderboard failed: internal error; see the log")
    assert "injected" not in line and "not written: leaderboard.csv" in line
    for name in PER_VIDEO:
        assert (out / name).is_file(), name
    for name in NEED_A_BOARD:
        assert not (out / name).exists(), name
    document = json.loads((out / "results.json").read_text())
    validate_results(document)
    assert document["leaderboard"] == [] and document["not_ranked"].startswith("forming the leaderboard failed")
    assert document["counts"]["scored"] == 4
    with pytest.raises(UserError, match="no leaderboard was formed"):
        write_report(out, thumbnails=0, progress=False)
    same_as_store(out)


def test_a_gt_whose_face_is_never_found_is_known_after_decoding_and_keeps_the_results(tmp_path, capsys,
                                                                                      clip_writer):
    """No face in any GT frame (only decoding can tell): the reference scores lip and eyebrow
    dynamics 0.0 there, which cannot normalise; the per-video values stay, the rest is refused."""
    gt, model = tmp_path / "gt", tmp_path / "model"
    for folder in (gt, model):
        folder.mkdir()
        for k in range(2):
            shutil.move(clip_writer(f"{folder.name}{k}.mp4", frames=12, size=(96, 96), tone=[0.3]),
                        folder / f"clip_{k}.mp4")
    out = tmp_path / "out"
    code, shown = evaluate(capsys, gt, model, out)
    assert code == EXIT_NOT_RANKED
    (line,) = shown.err.strip().splitlines()
    assert "no leaderboard: GT row 'GT' is zero or missing (NaN) for: " in line and "--partial-score" in line
    assert f"The per-video results are in {out}: results.jsonl, results.csv, raw_metrics.csv, results.json" in line
    assert not (out / "leaderboard.csv").exists()
    same_as_store(out)


# ---------------------------------------------------------------------- a new user's mistakes
def refused(capsys, *args):
    """`theval evaluate ARGS`: (exit code, the one line on stderr); nothing may have been scored."""
    code = main(["evaluate", *map(str, args), "--inline", "--quality", "proxy", "--quiet"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return code, lines[0]


@pytest.mark.parametrize("case", ["wrong gt", "empty gt", "empty model", "no pairing"])
def test_each_mistake_is_one_line_before_any_work(kit, tmp_path, capsys, case):
    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    for k, video in enumerate(kit.videos("frozen_mouth")):
        shutil.copy(video, renamed / f"take_{k}.mp4")
    gt, model, fix = {
        "wrong gt": (tmp_path / "no-such-folder", kit.dir("frozen_mouth"), "path not found"),
        "empty gt": (empty, kit.dir("frozen_mouth"), "no video files"),
        "empty model": (kit.dir("gt"), empty, "no video files"),
        "no pairing": (kit.dir("gt"), renamed, "name each generated video after the GT video"),
    }[case]
    code, line = refused(capsys, "--gt", gt, "--model", f"m={model}", "--out", out)
    assert code == EXIT_USAGE and fix in line
    assert (f"--gt {gt}" if "gt" in case else f"--model m={model}") in line
    assert not out.exists()  # refused before the store, Ray or a model


def test_a_partial_pairing_is_scored_and_stated(kit, tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    first, second = kit.videos("frozen_mouth")[:2]
    shutil.copy(first, model / Path(first).name)
    shutil.copy(second, model / "renamed.mp4")
    out = tmp_path / "out"
    code = main(["evaluate", "--gt", str(kit.dir("gt")), "--model", f"m={model}", "--out", str(out), "--inline",
                 "--quality", "proxy"])
    err = capsys.readouterr().err
    assert code in (0, 3)
    assert "model m: 1 of 2 video(s) pair with a GT video by file name; unpaired: renamed.mp4" in err
    document = json.loads((out / "results.json").read_text())
    assert document["pairing"]["m"] == {"videos": 2, "paired": 1, "unpaired": ["renamed.mp4"]}
    assert "m: 1 of 2 video(s) pair with a GT video" in write_report(out, thumbnails=0, progress=False).read_text()


def test_no_model_says_only_the_gt_is_scored(kit, tmp_path, capsys):
    code = main(["evaluate", "--gt", str(kit.dir("gt")), "--out", str(tmp_path / "out"), "--inline",
                 "--quality", "proxy"])
    assert code in (0, 3) and "no model given: only the GT videos are scored" in capsys.readouterr().err


def test_a_rerun_with_other_settings_says_what_changed(kit, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["evaluate", "--gt", str(kit.dir("gt")), "--model", f"m={kit.dir('frozen_mouth')}", "--out", str(out),
            "--inline", "--quality", "proxy"]
    assert main(args) in (0, 3)
    capsys.readouterr()
    assert main(args + ["--frame-stride", "2"]) in (0, 3)
    err = capsys.readouterr().err
    assert ("settings changed since an earlier run (frame_stride 1 -> 2): 4 video(s) scored then are scored again"
            in err)
    assert main(args) in (0, 3)  # back to the first settings: reused, nothing said about a change
    err = capsys.readouterr().err
    assert "settings changed" not in err and "4 video(s) already scored with these settings are reused" in err


def test_the_commands_bulk_prints_work_as_pasted(kit, tmp_path):
    """`theval bulk submit --store S` in the background prints what to run next; each line, pasted as
    printed in the folder it ran in, works on that store."""
    import shlex
    import subprocess
    import sys
    import time
    theval = str(Path(sys.executable).parent / "theval")

    def run(line):
        argv = shlex.split(line)
        assert argv[0] == "theval"
        return subprocess.run([theval, *argv[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    store = tmp_path / "my store.sqlite"
    submitted = run(f"theval bulk submit --store {shlex.quote(str(store))} --gt {kit.dir('gt')} "
                    f"--model m={kit.dir('frozen_mouth')} --quality proxy --workers 1")
    assert submitted.returncode == 0, submitted.stderr
    printed = submitted.stdout.strip().splitlines()[-1].split("    ")
    status, results = (line.strip() for line in printed)
    assert "--store" in status and "--store" in results
    for _ in range(300):
        shown = run(status)
        assert shown.returncode == 0, shown.stderr
        if " done:" in shown.stdout:
            break
        time.sleep(1)
    written = run(results)
    assert written.returncode in (0, 3), written.stderr
    job = status.split()[3]
    assert (tmp_path / f"results-{job}" / "leaderboard.csv").is_file()
    again = run(f"theval bulk resume {job} --store {shlex.quote(str(store))}")
    assert again.returncode == 0 and "is done" in again.stdout
    assert run(again.stdout.strip().split("; ", 1)[1]).returncode in (0, 3)
