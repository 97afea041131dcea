"""The public Python API on real models: Scorer against `theval evaluate --inline`, bytes against
a path, the Client against a real mesh on loopback (a reference set, evaluate, errors, a job), and
the README's example run as written. One clip of the session kit, scored once per way."""
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.mesh_support import Mesh
from theval_mesh import Client, Scorer
from theval_mesh.core.results import VideoResult
from theval_mesh.pure.errors import AccessDenied, AlreadyExists, InputTooLarge, NotFound, UserError, VideoError

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
THEVAL = str(Path(sys.executable).parent / "theval")


def exactly(values: dict):
    """The same floats, bit for bit, NaN where NaN."""
    return pytest.approx(values, rel=0, abs=0, nan_ok=True)


@pytest.fixture(scope="module")
def clip(kit) -> Path:
    return kit.video("clip_00")


@pytest.fixture(scope="module")
def scorer():
    return Scorer(quality="proxy")


@pytest.fixture(scope="module")
def scored(scorer, clip) -> VideoResult:
    return scorer.score(clip)


def test_the_scorer_gives_what_theval_evaluate_inline_gives(scored, clip, tmp_path):
    run = subprocess.run([THEVAL, "evaluate", "--gt", str(clip), "--out", str(tmp_path), "--inline",
                          "--quality", "proxy", "--quiet"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    [line] = (tmp_path / "results.jsonl").read_text().splitlines()
    cli = VideoResult.from_json(line)
    assert scored.status == "ok" and scored.video == str(clip) and len(scored.metrics) == 8
    assert scored.metrics == exactly(cli.metrics)
    assert (scored.nan_reasons, scored.counts, scored.frames_used, scored.provenance) == \
        (cli.nan_reasons, cli.counts, cli.frames_used, cli.provenance)


def test_score_bytes_equals_score_and_keeps_the_evaluators_limits(scorer, scored, clip, monkeypatch):
    data = clip.read_bytes()
    uploaded = scorer.score_bytes(data, name="upload.mp4", model="m")
    assert (uploaded.status, uploaded.video, uploaded.model) == ("ok", "upload.mp4", "m")
    assert uploaded.metrics == exactly(scored.metrics)
    half = scorer.score_bytes(data[:len(data) // 2], name="half.mp4")
    assert half.status == "failed" and half.reason and half.video == "half.mp4"
    assert tempfile.gettempdir() not in half.reason + "".join(half.warnings)  # not the temporary file's name
    with pytest.raises(VideoError, match="empty"):
        scorer.score_bytes(b"")
    monkeypatch.setattr(scorer, "max_video_bytes", len(data) - 1)
    with pytest.raises(InputTooLarge, match=f"over the {len(data) - 1}-byte limit"):
        scorer.score_bytes(data)


# ---------------------------------------------------------------------- through a mesh
@pytest.fixture(scope="module")
def job_videos(clip, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("job-videos")
    shutil.copy(clip, folder / clip.name)
    return folder


@pytest.fixture(scope="module")
def client(kit, job_videos, tmp_path_factory):
    mesh = Mesh(tmp_path_factory.mktemp("mesh"), roots=[kit.out_dir, job_videos],
                evaluator_args=["--job-workers", "1"])
    try:
        mesh.start()
        with Client(mesh.procs["evaluator"].address, timeout_s=600) as c:
            yield c
    finally:
        mesh.stop()


def test_client_evaluate_equals_the_scorer_and_scores_against_a_reference(client, clip, scored):
    progress = []
    reference = client.create_reference("api-gt", [clip], on_progress=lambda *p: progress.append(p))
    assert (reference.name, reference.videos, reference.scored, reference.failures) == ("api-gt", 1, 1, [])
    assert progress == [(1, 1, str(clip))]  # one message per GT video scored, as it ends
    with pytest.raises(AlreadyExists, match="api-gt"):  # a refusal through the stream: the API's error
        client.create_reference("api-gt", [clip])
    # a server without tokens has one caller, its sets owned by no one in particular ("")
    assert client.references() == [reference] and reference.owner == ""
    with pytest.raises(AccessDenied, match="only an admin"):
        client.references(every_owner=True)
    assert reference.raw["Lip sync"] == scored.metrics["lip_sync"]
    result = client.evaluate(clip.read_bytes(), reference="api-gt", model="api-model", name="upload.mp4")
    assert (result.status, result.video, result.model) == ("ok", "upload.mp4", "api-model")
    assert result.metrics == exactly(scored.metrics)
    # the GT clip against itself: 1 everywhere
    assert result.scores.reference == "api-gt" and result.scores.final == 1.0
    assert set(result.scores.normalised.values()) == {1.0} and len(result.scores.normalised) == 8

    gt, model = client.leaderboard("api-gt")
    assert (gt.model, gt.is_gt, gt.final_ci, model.model, model.rank) == ("api-gt", True, None, "api-model", 1)
    # one video: its resamples would all be itself, so no interval (n=1), not one of width 0
    assert model.final == 1.0 and model.final_ci is None and model.normalised_ci == model.groups_ci == {}
    assert client.leaderboard("api-gt", {"Lip sync": 0})[1].final == 1.0
    with pytest.raises(UserError, match="weights"):  # a path is text to a server, never a file it reads
        client.leaderboard("api-gt", "/etc/hostname")


def test_client_errors_are_the_projects_exceptions_and_a_bad_video_a_failed_result(client, clip, tmp_path):
    outside = tmp_path / "outside.mp4"
    shutil.copy(clip, outside)
    with pytest.raises(AccessDenied, match="outside"):
        client.evaluate(outside)
    with pytest.raises(NotFound, match="nope"):
        client.evaluate(clip, reference="nope")
    with pytest.raises(NotFound, match="job-nope"):
        client.status("job-nope")
    with pytest.raises(UserError, match="empty"):
        client.evaluate(b"")
    junk = client.evaluate(b"not a video at all", name="junk.mp4")
    assert (junk.status, junk.video, junk.scores) == ("failed", "junk.mp4", None) and junk.reason


def test_a_job_submitted_through_the_client_reaches_done_with_its_results(client, job_videos, clip, scored):
    job = client.submit(job_videos)
    events = list(client.stream(job))
    assert events[-1].state == "done" and events[-1].stopped, events[-1]
    status = client.status(job)
    assert (status.id, status.total, status.done, status.failed, status.remaining) == (job, 1, 1, 0, 0)
    assert status.finished >= status.started > 0
    [result] = client.results(job)
    assert result.status == "ok" and Path(result.video).name == clip.name
    assert result.metrics == exactly(scored.metrics)


# ---------------------------------------------------------------------- the README
def readme_example() -> str:
    """The first python block of the README's "Python API" section."""
    section = (ROOT / "README.md").read_text().split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readmes_example_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(readme_example(), "README.md (Python API)", "exec"), namespace)
    run, result, same = namespace["run"], namespace["result"], namespace["same"]
    assert [r.model for r in run.leaderboard] == ["GT", "frozen_mouth"] and run.paths == {}
    frozen = run.leaderboard[1]
    assert frozen.rank == 1 and frozen.normalised["Lip dynamics"] < 0.9  # a frozen mouth has no lip dynamics
    assert len(run.results) == 4 and all(r.status == "ok" for r in run.results)
    assert result.status == "ok" and same.metrics == exactly(result.metrics)
    printed = capsys.readouterr().out
    assert "frozen_mouth 1 " in printed and "Final score" in printed
