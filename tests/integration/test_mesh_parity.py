"""Mesh and embedded mode give IDENTICAL results: same backends, same frames, same composition."""
import dataclasses

import grpc
import pytest

from tests.support.mesh_support import Mesh
from theval_mesh.core.engine import Engine
from theval_mesh.core.results import json_safe
from theval_mesh.pure.scoring.final_score import RawRow, leaderboard
from theval_mesh.pure.scoring.names import NAME_OF_KEY
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2
from theval_mesh.synth import write_bad_inputs

pytestmark = pytest.mark.slow
PROXY = RunSettings(quality="proxy")
SINGLE = RunSettings(quality="proxy", single_pass=True, profile="paper", frame_stride=2)


@pytest.fixture(scope="module")
def bad(kit):
    return write_bad_inputs(kit.out_dir / "bad_inputs", size=kit.size, duration_s=2.0)


@pytest.fixture(scope="module")
def embedded(evaluated):
    """score(path, settings) -> the embedded VideoResult: from the session's evaluation of the
    kit (proxy quality) when it has the video, else scored here."""
    cache = {(r.video, PROXY): r for r in evaluated[1]}
    engines = {}

    def score(path, settings=PROXY):
        key = (str(path), settings)
        if key not in cache:
            cache[key] = engines.setdefault(settings, Engine(settings)).score_video(path)
        return cache[key]
    return score


@pytest.fixture(scope="module")
def mesh(kit, tmp_path_factory):
    m = Mesh(tmp_path_factory.mktemp("mesh"), roots=[kit.out_dir]).start()
    yield m
    m.stop()


def mesh_result(mesh, path, settings, model="", content=None):
    request = dict(name=str(path), model=model, settings=wire.settings_to_proto(settings))
    if content is not None:
        return wire.result_from_proto(mesh.evaluate(content=content, **request).result)
    return wire.result_from_proto(mesh.evaluate(path, **request).result)


def comparable(result):
    """Everything but the wall times, with NaN as None (NaN != NaN)."""
    return json_safe(dataclasses.asdict(dataclasses.replace(result, seconds=0.0, timings={})))


def test_raw_metrics_are_identical_on_the_synthetic_kit(kit, bad, mesh, embedded):
    videos = kit.videos("gt") + [kit.video("clip_00", "static_head"), kit.video("clip_01", "silent_mouth"),
                                 bad["no_audio"]]
    for path in videos:
        local = embedded(path)
        remote = mesh_result(mesh, path, PROXY, local.model)
        assert local.status == "ok", local.reason
        assert comparable(remote) == comparable(local), path
        assert list(remote.metrics) == list(local.metrics)  # same order, for the CSV writers
        assert list(remote.nan_reasons) == list(local.nan_reasons)


def test_identical_with_the_single_pass_and_a_stride(kit, mesh, embedded):
    for path in kit.videos("gt")[:1]:
        local = embedded(path, SINGLE)
        assert comparable(mesh_result(mesh, path, SINGLE)) == comparable(local), path
        assert local.provenance["landmarks"]["passes"] == ["single"]
        assert embedded(path).provenance["landmarks"]["passes"] == ["lip_dynamics", "lip_sync", "mouth_quality",
                                                                    "single", "silent_lip"]  # the default


def test_identical_when_the_video_travels_as_bytes(kit, mesh, embedded):
    path = kit.videos("gt")[0]
    local = embedded(path)
    assert comparable(mesh_result(mesh, path, PROXY, local.model, content=path.read_bytes())) == comparable(local)


def test_failed_videos_fail_identically(bad, mesh, embedded):
    no_face = embedded(bad["no_face"])  # profile reference scores it, as the reference code does
    assert no_face.status == "ok" and no_face.metrics["eyebrow_dynamics"] == 0.0
    assert comparable(mesh_result(mesh, bad["no_face"], PROXY)) == comparable(no_face)
    for name in ("corrupt", "not_a_video"):
        local = embedded(bad[name])
        assert local.status == "failed"
        with pytest.raises(grpc.RpcError) as err:
            mesh_result(mesh, bad[name], PROXY)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        trailer = dict(err.value.trailing_metadata())["theval-result-bin"]  # the failed result
        remote = wire.result_from_proto(evaluator_pb2.VideoResult.FromString(trailer))
        assert comparable(remote) == comparable(local), name


def test_reference_scores_match_the_scoring_of_embedded_results(kit, mesh, embedded):
    ref = mesh.evaluator.CreateReference(
        evaluator_pb2.CreateReferenceRequest(name="kit-gt", replace=True,
                                             videos=[common_pb2.VideoRef(uri=str(kit.dir("gt")))]),
        timeout=300)
    assert ref.scored == ref.videos == len(kit.clips)
    gt = [embedded(p) for p in kit.videos("gt")]
    gt_values = {NAME_OF_KEY[k]: sum(r.metrics[k] for r in gt) / len(gt) for k in NAME_OF_KEY}
    assert dict(ref.raw) == pytest.approx(gt_values, rel=1e-12)

    path = kit.video("clip_00", "static_head")
    answer = mesh.evaluate(path, reference="kit-gt", model="static_head")
    local = embedded(path)
    row = RawRow("static_head", {NAME_OF_KEY[k]: v for k, v in local.metrics.items()}, None, local.provenance)
    board = leaderboard([RawRow("GT", dict(ref.raw), None, gt[0].provenance), row], gt_name="GT")
    assert dict(answer.scores.normalised) == board.row("static_head").scores
    assert answer.scores.final_score == board.row("static_head").final

    refs = mesh.evaluator.ListReferences(evaluator_pb2.ListReferencesRequest(), timeout=10).references
    assert [r.name for r in refs] == ["kit-gt"]
    board = mesh.evaluator.GetLeaderboard(evaluator_pb2.GetLeaderboardRequest(reference="kit-gt"), timeout=10)
    assert [(r.model, r.rank) for r in board.rows] == [("kit-gt", 0), ("static_head", 1)]
    assert board.rows[1].scores["Head motion dynamics"] == answer.scores.normalised["Head motion dynamics"]
    assert not board.rows[1].HasField("final_ci") and not board.rows[1].scores_ci  # one video: no interval (n=1)
    for clip in kit.clips[1:]:  # more videos of the model: intervals over them
        mesh.evaluate(kit.video(clip, "static_head"), reference="kit-gt", model="static_head")
    board = mesh.evaluator.GetLeaderboard(evaluator_pb2.GetLeaderboardRequest(reference="kit-gt"), timeout=10)
    # intervals over the model's videos, the reference set's means held fixed
    b = board.intervals
    assert (b.resamples, b.seed, b.level, b.gt_resampled) == (10_000, 0, 0.95, False)
    row = board.rows[1]
    assert row.final_ci.low <= row.final_score <= row.final_ci.high
    assert set(row.scores_ci) == set(row.scores) and not board.rows[0].HasField("final_ci")
