"""Findings of the mesh's security probes, below the mesh: request limits of the leaf services,
landmark arrays checked as they come off the wire, path edge cases and status details, a call
without a token refused before its message is read."""
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.backends.media.sources import MAX_URI_BYTES, resolve_uri
from theval_mesh.pure.errors import KEEP_DETAIL, MAX_DETAIL, AccessDenied, InputTooLarge, ServiceError, VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.rpc import wire
from theval_mesh.rpc.config import MIB, Config
from theval_mesh.rpc.security import AuthInterceptor, Tokens
from theval_mesh.rpc.servicers.common import MAX_FPS, request_limit
from theval_mesh.rpc.status import status_of
from theval_mesh.rpc.v1 import common_pb2, headpose_pb2, landmarks_pb2, quality_pb2

C = grpc.StatusCode


# ---------------------------------------------------------------- 1. receive limits
def config(seconds=600.0, video=64 * MIB):
    return Config(service="x", host="127.0.0.1", port=0, metrics_port=0, max_video_bytes=video,
                  limits=Limits(max_duration_s=seconds))


def face_rows(frames, points=478):
    return np.random.default_rng(0).random((frames, points, 3)).astype(np.float32)


def test_leaf_limits_follow_the_formula_with_the_defaults():
    c = config()
    frames = 600 * MAX_FPS
    assert request_limit(c, video=False, series=1) == frames * (478 * 3 * 4 + 10) + MIB == 207_904_576
    assert request_limit(c, video=True, series=2) == 64 * MIB + 2 * frames * 5746 + MIB == 481_869_440
    assert request_limit(c, video=True, frame_lists=1) == 64 * MIB + frames * 10 + MIB
    assert request_limit(c, video=True) == 65 * MIB
    assert request_limit(config(seconds=1e9), video=True, series=2) == c.max_message_bytes  # never above


def test_the_longest_allowed_video_s_requests_fit_their_limits():
    """Real messages, serialized, for the longest video of a 2 s limit at the frame-rate bound:
    frame numbers as large as they come (10-byte varints, the worst case)."""
    c, frames, video = config(seconds=2.0, video=5000), 2 * MAX_FPS, b"v" * 5000
    index = [2 ** 62 + i for i in range(frames)]
    series = [common_pb2.LandmarkSeries(pass_name=n, num_points=478, frame_index=index)
              for n in ("single", "mouth_quality")]
    for s in series:
        wire.set_array(s, "points", face_rows(frames))
    headpose = headpose_pb2.HeadPoseRequest(width=4096, height=4096, num_points=478)
    wire.set_array(headpose, "points", face_rows(frames))
    quality = quality_pb2.QualityRequest(video=common_pb2.VideoRef(content=video), landmarks=series)
    track = landmarks_pb2.TrackRequest(video=common_pb2.VideoRef(content=video), silent_lip_pass=True,
                                       silent_frames=index)
    assert headpose.ByteSize() <= request_limit(c, video=False, series=1)
    assert quality.ByteSize() <= request_limit(c, video=True, series=2)
    assert track.ByteSize() <= request_limit(c, video=True, frame_lists=1)


# ---------------------------------------------------------------- 2. arrays off the wire
def headpose_request(points, num_points=478):
    m = headpose_pb2.HeadPoseRequest(width=64, height=64, num_points=num_points)
    wire.set_array(m, "points", points)
    return m


def bad_points():
    """(name, points, num_points, what the reason says) of arrays FaceMesh cannot produce."""
    good = face_rows(3)

    def with_value(v, row=1):
        p = good.copy()
        p[row, 7, 1] = v
        return p
    return [
        ("point count", face_rows(3, 10), 10, "num_points is 10"),
        ("inf", with_value(np.inf), 478, "inf is not a normalised coordinate"),
        ("-inf", with_value(-np.inf), 478, "-inf is not a normalised coordinate"),
        ("NaN in a face", with_value(np.nan), 478, "NaN beside coordinates"),
        ("1e30", with_value(1e30), 478, "1e+30 is not a normalised coordinate"),
        ("not whole rows", good.reshape(-1)[:-2], 478, "floats for 478 points (need frames x points x 3)"),
    ]


@pytest.mark.parametrize("name,points,num_points,reason", bad_points(), ids=[c[0] for c in bad_points()])
def test_malformed_landmark_arrays_are_refused_with_one_line(name, points, num_points, reason):
    with pytest.raises(ValueError, match=re.escape(reason)) as err:
        wire.points_from_proto(headpose_request(points, num_points), "points", num_points)
    assert "\n" not in str(err.value)


def test_faces_and_no_face_rows_pass():
    points = face_rows(4)
    points[2] = np.nan  # no face in that frame
    points[3] *= -1.5  # a face partly outside the frame
    back = wire.points_from_proto(headpose_request(points), "points", 478)
    assert back.shape == (4, 478, 3) and np.array_equal(back, points, equal_nan=True)
    assert wire.points_from_proto(headpose_request(np.zeros((0, 468, 3))), "points", 468).shape == (0, 468, 3)


def test_landmark_passes_must_cover_the_same_frames():
    def series(name, frames):
        return wire.landmarks_to_proto(name, LandmarkSeries.from_arrays(np.arange(frames), face_rows(frames)))
    assert set(wire.landmark_passes_from_proto([series("single", 3), series("mouth_quality", 3)])) == \
        {"single", "mouth_quality"}
    with pytest.raises(ValueError, match="'mouth_quality' .2 frames. does not cover the frames of 'single' .3."):
        wire.landmark_passes_from_proto([series("single", 3), series("mouth_quality", 2)])
    with pytest.raises(ValueError, match="given twice"):
        wire.landmark_passes_from_proto([series("single", 3), series("single", 3)])
    short = series("single", 3)
    short.frame_index.append(3)  # 4 frame numbers for 3 rows
    with pytest.raises(ValueError, match="'single': 4302 floats for 4 frames of 478 points"):
        wire.landmark_passes_from_proto([short])


# ---------------------------------------------------------------- 3. paths and status details
@pytest.fixture
def root(tmp_path):
    (tmp_path / "videos").mkdir()
    return tmp_path / "videos"


def path_cases(root):
    """(uri, error, what the reason says) of paths the file system cannot take."""
    deep = str(root) + "/d" * 1100 + "/clip.mp4"  # 1,100 folders: built as a string only
    return [
        (f"{root}/{'n' * 300}.mp4", VideoError, "304 bytes, over the file system's 255-byte limit"),
        (f"{root}/{'p' * 5000}", VideoError, "over the 4096-byte limit of a path"),
        ("/" + "q/" * 2500, VideoError, "over the 4096-byte limit of a path"),  # before the roots
        (f"file://{root}/a%00b.mp4", VideoError, "NUL byte"),
        (f"{root}/a\x00b.mp4", VideoError, "NUL byte"),
        ("/" + "x" * 20_000_000, VideoError, "the URI is 20000001 bytes"),
        (deep, None, None),  # a path the file system can take: resolved (the decoder says "not found")
    ]


def test_path_edge_cases_are_refused_before_the_file_system(root):
    roots = [os.path.realpath(root)]
    for uri, error, reason in path_cases(root):
        if error is None:
            assert resolve_uri(uri, roots) == os.path.realpath(uri)
            continue
        with pytest.raises(error) as err:
            resolve_uri(uri, roots)
        assert reason in err.value.reason, (uri[:80], err.value.reason)
        assert len(str(err.value)) < 1000  # neither the reason nor the label echoes a long URI
    with pytest.raises(AccessDenied) as err:  # 1,100 folders deep, outside the roots
        resolve_uri("/d" * 1100 + "/clip.mp4", roots)
    assert status_of(err.value)[1].startswith("outside the folders this server may read")  # the reason survives
    encoded = "".join(f"%{b:02X}" for b in ("é" * 100).encode())  # 600 characters for a 200-byte name
    assert resolve_uri(f"file://{root}/{encoded}.mp4", roots) == os.path.realpath(f"{root}/{'é' * 100}.mp4")
    assert len(("/" + "é" * 2048).encode()) > MAX_URI_BYTES  # the bound is in bytes, as PATH_MAX
    with pytest.raises(VideoError, match="4097 bytes"):
        resolve_uri("/" + "é" * 2048, roots)


def test_a_path_the_file_system_refuses_is_a_video_error(root):
    (root / "a.mp4").symlink_to(root / "b.mp4")  # a loop: stat says ELOOP
    (root / "b.mp4").symlink_to(root / "a.mp4")
    with pytest.raises(VideoError, match="cannot read the file: Too many levels of symbolic links"):
        resolve_uri(str(root / "a.mp4"), [os.path.realpath(root)])


@pytest.mark.parametrize("err,code", [
    (VideoError("/v.mp4", "r" * 20_000_000), C.INVALID_ARGUMENT),
    (InputTooLarge("/v.mp4", "r" * 5000), C.RESOURCE_EXHAUSTED),
    (AccessDenied("r" * 5000 + ": outside the folders"), C.PERMISSION_DENIED),
    (ServiceError("UNAVAILABLE", "r" * 5000), C.UNAVAILABLE),
])
def test_every_status_detail_is_capped(err, code):
    got, detail = status_of(err)
    assert got == code and len(detail) <= MAX_DETAIL
    assert detail.startswith("r" * KEEP_DETAIL + "... (")
    assert detail.endswith(f"... ({len(err.reason if isinstance(err, VideoError) else str(err))} characters)")


def test_a_short_detail_is_left_alone():
    assert status_of(VideoError("/v.mp4", "file not found: check the path")) == \
        (C.INVALID_ARGUMENT, "file not found: check the path")


def test_an_internal_error_shows_an_id_and_logs_it_with_a_short_text(caplog):
    secret = "/srv/private/models/" + "z" * 20_000_000

    def unexpected():
        raise ValueError(f"cannot open {secret}")
    try:
        unexpected()
    except ValueError as e:
        err = e
    with caplog.at_level(logging.ERROR, logger="theval.internal"):
        code, detail = status_of(err, "Estimate")
    assert code == C.INTERNAL and "/srv/private" not in detail
    assert detail.startswith("internal error; see the log (error ")
    error_id = detail.rsplit(" ", 1)[1].rstrip(")")
    (record,) = caplog.records
    line = record.getMessage()
    assert f"Estimate: internal error {error_id}: ValueError('cannot open /srv/private" in line
    assert "characters)" in line and len(line) < 3000  # the text shortened, the traceback kept
    assert "test_mesh_hardening.py" in line


# ---------------------------------------------------------------- 4. authentication first
TOKEN = "t" * 32


@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "response-stream"])
def test_a_call_without_a_known_token_is_refused_before_its_message_is_read(streaming):
    """A real server on loopback with the evaluator's AuthInterceptor: the refused calls' messages
    are never deserialized (the server never took them in); a call with the token is served."""
    read = []

    def deserialize(data: bytes) -> bytes:
        read.append(len(data))
        return data
    kind = grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
    answer = (lambda request, context: iter([b"ok"])) if streaming else (lambda request, context: b"ok")
    server = grpc.server(ThreadPoolExecutor(2), interceptors=[AuthInterceptor(Tokens([("alice", TOKEN)]))],
                         options=[("grpc.max_receive_message_length", 8 * MIB), ("grpc.http2.bdp_probe", 0)])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "test.Probe", {"Call": kind(answer, deserialize, lambda b: b)})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = (channel.unary_stream if streaming else channel.unary_unary)("/test.Probe/Call")
            for metadata in ((), (("authorization", "Bearer " + "x" * 32),)):
                with pytest.raises(grpc.RpcError) as err:
                    list(call(b"v" * (4 * MIB), metadata=metadata, timeout=10)) if streaming else \
                        call(b"v" * (4 * MIB), metadata=metadata, timeout=10)
                assert err.value.code() == C.UNAUTHENTICATED and "bearer token" in err.value.details()
            assert read == []
            good = call(b"v" * (4 * MIB), metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=10)
            assert (list(good) if streaming else [good]) == [b"ok"] and read == [4 * MIB]
    finally:
        server.stop(0)
