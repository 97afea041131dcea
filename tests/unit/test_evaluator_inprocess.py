"""The evaluator servicer through its gRPC stub, on an in-process mesh (tests/support/inprocess_mesh.py: the
four leaf services and the evaluator on loopback ports in this process, real backends, quality in
proxy mode): a tiny clip scores, and requests outside the rules get their status and a detail."""
import math

import grpc
import pytest

from tests.support.inprocess_mesh import MAX_VIDEO_BYTES
from tests.support.video_files import gradient, tone, write_video
from theval_mesh.rpc.protocol import RESULT_TRAILER
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2

C = grpc.StatusCode
METRICS = {"global_aesthetic", "mouth_quality", "face_quality", "lip_dynamics", "head_motion", "eyebrow_dynamics",
           "silent_lip_stability", "lip_sync"}


@pytest.fixture(scope="module")
def mesh(inprocess_mesh):
    return inprocess_mesh


@pytest.fixture(scope="module")
def clip(mesh):
    """64x64, 8 frames at 25 fps, 0.32 s of a 440 Hz tone: no face."""
    return write_video(mesh.root / "tiny.mp4", gradient(8, 64, 64), audio=tone(0.32))


def status(call):
    """(code, detail, trailing metadata) of a call expected to fail."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    err = caught.value
    return err.code(), err.details(), dict(err.trailing_metadata() or ())


def test_a_tiny_clip_scores_ok_and_every_nan_has_its_reason(mesh, clip):
    r = mesh.evaluate(uri=clip, model="m").result
    assert r.status == "ok" and not r.reason, r.reason
    assert (r.frames_total, r.face_frames, r.width, r.height) == (8, 0, 64, 64)
    assert set(r.metrics) == METRICS
    nan = {k for k, v in r.metrics.items() if math.isnan(v)}
    assert nan == set(r.nan_reasons), (nan, dict(r.nan_reasons))
    assert r.nan_reasons["head_motion"] == "no face found" and r.nan_reasons["mouth_quality"] == "no face found"
    assert r.nan_reasons["silent_lip_stability"] == "fewer than 2 silent frames with a face"
    assert math.isfinite(r.metrics["global_aesthetic"])
    assert '"single_pass": true' in r.settings_json  # the server's default settings
    assert "proxy" in r.provenance_json


def test_the_same_clip_sent_as_bytes_scores_the_same(mesh, clip):
    by_uri = mesh.evaluate(uri=clip).result
    by_bytes = mesh.evaluate(content=clip.read_bytes()).result
    assert by_bytes.status == "ok" and by_bytes.video == "<video bytes>"
    assert dict(by_bytes.nan_reasons) == dict(by_uri.nan_reasons)
    assert {k: v for k, v in by_bytes.metrics.items() if not math.isnan(v)} == \
        {k: v for k, v in by_uri.metrics.items() if not math.isnan(v)}


@pytest.mark.parametrize("request_kw, detail", [
    ({"content": b""}, "empty video (0 bytes)"),
    ({"uri": "http://example.com/v.mp4"}, "URI scheme 'http' is not supported"),
    ({"uri": "relative/v.mp4"}, "the path must be absolute"),
    ({"settings": common_pb2.RunSettings(profile="bogus")}, "settings: unknown profile 'bogus'"),
    ({"settings": common_pb2.RunSettings(quality="best")}, "settings: unknown quality mode 'best'"),
    ({"settings": common_pb2.RunSettings(frame_stride=-1)}, "settings: frame stride must be >= 1"),
    ({"model": "bad\nname"}, "model 'bad\\nname'"),
    ({"name": "a\x00b"}, "name: at most 1024 printable characters"),
], ids=["empty-bytes", "http-uri", "relative-uri", "profile", "quality", "stride", "model-name", "label"])
def test_a_bad_request_is_invalid_argument_naming_the_problem(mesh, clip, request_kw, detail):
    kw = dict(request_kw)
    if "uri" in kw:
        video = common_pb2.VideoRef(uri=kw.pop("uri"))
    elif "content" in kw:
        video = common_pb2.VideoRef(content=kw.pop("content"))
    else:
        video = common_pb2.VideoRef(uri=str(clip))
    code, got, _ = status(lambda: mesh.stub.Evaluate(evaluator_pb2.EvaluateRequest(video=video, **kw), timeout=60))
    assert code == C.INVALID_ARGUMENT and detail in got, (code, got)


def test_an_unreadable_video_is_invalid_argument_with_its_failed_result(mesh):
    """The answer's trailer carries the video's failed result (what a bulk job records for it)."""
    code, detail, trailer = status(lambda: mesh.evaluate(content=b"not a video at all", name="junk.mp4"))
    assert code == C.INVALID_ARGUMENT and "not a readable video" in detail, (code, detail)
    assert "theval" not in detail and "/tmp" not in detail  # the temporary file's name stays inside
    result = evaluator_pb2.VideoResult.FromString(trailer[RESULT_TRAILER])
    assert result.status == "failed" and result.video == "junk.mp4" and "not a readable video" in result.reason


def test_a_video_outside_the_allowed_roots_is_permission_denied(mesh, clip, tmp_path):
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(clip.read_bytes())
    code, detail, _ = status(lambda: mesh.evaluate(uri=outside))
    assert code == C.PERMISSION_DENIED and detail.startswith("outside the folders this server may read"), detail


def test_video_bytes_over_the_limit_are_resource_exhausted(mesh):
    code, detail, _ = status(lambda: mesh.evaluate(content=b"\0" * (MAX_VIDEO_BYTES + 1)))
    assert code == C.RESOURCE_EXHAUSTED, (code, detail)
    assert f"video is {MAX_VIDEO_BYTES + 1} bytes, over the {MAX_VIDEO_BYTES}-byte limit" in detail


def test_a_message_over_the_receive_limit_is_refused_unread(mesh):
    """Past max_video_bytes + 1 MiB gRPC itself refuses the message (the servicer never sees it)."""
    before = len(mesh.evaluate_log.times())
    code, detail, _ = status(lambda: mesh.evaluate(content=b"\0" * (MAX_VIDEO_BYTES + 2 * 1024 * 1024)))
    assert code == C.RESOURCE_EXHAUSTED, (code, detail)
    assert len(mesh.evaluate_log.times()) == before  # never reached the servicer


def test_an_unknown_reference_set_is_not_found(mesh, clip):
    code, detail, _ = status(lambda: mesh.evaluate(uri=clip, reference="nope"))
    assert code == C.NOT_FOUND and detail.startswith("no GT reference set named 'nope': ListReferences lists yours"), \
        (code, detail)
    code, detail, _ = status(lambda: mesh.stub.GetLeaderboard(evaluator_pb2.GetLeaderboardRequest(reference="nope"),
                                                              timeout=30))
    assert code == C.NOT_FOUND and "'nope'" in detail, (code, detail)


def test_without_tokens_no_caller_is_an_admin(mesh):
    code, detail, _ = status(lambda: mesh.stub.ListReferences(evaluator_pb2.ListReferencesRequest(every_owner=True),
                                                              timeout=30))
    assert code == C.PERMISSION_DENIED and "only an admin" in detail, (code, detail)
    code, _, _ = status(lambda: mesh.stub.GetLeaderboard(
        evaluator_pb2.GetLeaderboardRequest(reference="nope", owner="alice"), timeout=30))
    assert code == C.PERMISSION_DENIED
