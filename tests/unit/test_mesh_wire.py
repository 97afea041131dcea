"""What crosses the wire comes back bit for bit; video references obey the allowed roots."""
import math
import os

import numpy as np
import pytest

from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.backends.media.sources import local_video, resolve_uri
from theval_mesh.core.results import VideoResult
from theval_mesh.pure.errors import AccessDenied, InputTooLarge, VideoError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.v1 import audio_pb2, common_pb2, evaluator_pb2, headpose_pb2


def bits(a):
    return np.asarray(a).tobytes()


def test_landmarks_travel_as_exact_float32_with_nan_rows():
    rng = np.random.default_rng(0)
    points = rng.random((7, 478, 3)).astype(np.float32)
    points[2] = np.nan
    series = LandmarkSeries.from_arrays(np.arange(0, 14, 2), points)
    message = common_pb2.LandmarkSeries.FromString(wire.landmarks_to_proto("single", series).SerializeToString())
    assert len(message.points) == points.size  # one packed field, readable by any protobuf client
    back = wire.landmarks_from_proto(message)
    assert back.points.dtype == np.float32 and bits(back.points) == bits(points)
    assert back.frame_index.tolist() == list(range(0, 14, 2))
    assert back.face_found().tolist() == [True, True, False, True, True, True, True]


def test_float64_series_travel_exactly():
    rng = np.random.default_rng(1)
    pose = HeadPose(*(rng.normal(size=9) for _ in range(5)))
    pose.roll[3] = np.nan
    m = headpose_pb2.HeadPoseResponse.FromString(
        wire.pose_to_proto(pose, headpose_pb2.HeadPoseResponse()).SerializeToString())
    back = wire.pose_from_proto(m)
    for name in ("pitch", "yaw", "roll", "cx", "cy"):
        assert bits(getattr(back, name)) == bits(getattr(pose, name))
    audio = AudioSeries(rng.random(40), np.arange(40) * 0.05, [(0.1, 0.7), (1.2, 1.9)])
    m = audio_pb2.AudioResponse.FromString(wire.audio_to_proto(audio, True, audio_pb2.AudioResponse())
                                           .SerializeToString())
    back = wire.audio_from_proto(m)
    assert bits(back.rms) == bits(audio.rms) and bits(back.rms_times) == bits(audio.rms_times)
    assert back.speech == audio.speech
    assert wire.audio_from_proto(wire.audio_to_proto(AudioSeries(), True, audio_pb2.AudioResponse())).rms is None


def test_packed_arrays_read_what_a_plain_protobuf_client_wrote():
    m = common_pb2.LandmarkSeries(pass_name="x", num_points=1, frame_index=[5], points=[0.5, -1.25, 3.0])
    assert wire.get_array(m, "points").tolist() == [0.5, -1.25, 3.0]
    assert wire.get_array(common_pb2.LandmarkSeries(), "points").tolist() == []


def test_bad_landmark_shapes_are_refused():
    m = common_pb2.LandmarkSeries(pass_name="x", num_points=478, frame_index=[0, 1], points=[0.0] * 5)
    with pytest.raises(ValueError, match="need frames x points x 3"):
        wire.landmarks_from_proto(m)


def test_results_and_settings_round_trip_in_the_engine_order():
    r = VideoResult("m", "v.mp4", "ok", metrics={"global_aesthetic": 1.5, "lip_sync": math.nan},
                    nan_reasons={"lip_sync": "no audio track"}, counts={"global_aesthetic": 3, "lip_sync": 0},
                    warnings=["w"], settings=RunSettings().key(), provenance={"profile": "reference", "b": [1]})
    back = wire.result_from_proto(evaluator_pb2.VideoResult.FromString(wire.result_to_proto(r).SerializeToString()))
    assert back.to_json() == r.to_json() and list(back.metrics) == list(r.metrics)
    s = RunSettings(profile="paper", quality="proxy", frame_stride=3, single_pass=True)
    assert wire.settings_from_proto(wire.settings_to_proto(s), RunSettings(), s.limits) == s
    assert wire.settings_from_proto(common_pb2.RunSettings(), s, s.limits).profile == "paper"  # defaults


def test_uris_must_be_files_under_the_allowed_roots(tmp_path):
    root = tmp_path / "videos"
    (root / "sub").mkdir(parents=True)
    video = root / "sub" / "a.mp4"
    video.write_bytes(b"x")
    secret = tmp_path / "secret.mp4"
    secret.write_bytes(b"x")
    (root / "link.mp4").symlink_to(secret)
    roots = [os.path.realpath(root)]
    assert resolve_uri(str(video), roots) == os.path.realpath(video)
    assert resolve_uri(f"file://{video}", roots) == os.path.realpath(video)
    assert resolve_uri(f"file://localhost{root}/sub/a%2Emp4", roots) == os.path.realpath(video)
    for uri in (str(secret), f"{root}/../secret.mp4", f"{root}/sub/../../secret.mp4", str(root / "link.mp4"),
                f"{root}x/a.mp4", "/etc/passwd"):
        with pytest.raises(AccessDenied):
            resolve_uri(uri, roots)
    for uri, why in (("http://host/a.mp4", "scheme 'http'"), ("s3://b/a.mp4", "scheme 's3'"),
                     ("sub/a.mp4", "absolute"), (f"file://otherhost{video}", "local path"), ("", "empty"),
                     ("a\x00b", "malformed")):
        with pytest.raises(VideoError, match=why):
            resolve_uri(uri, roots)


def test_bytes_become_a_temporary_file_that_is_removed(tmp_path):
    with local_video(None, b"abc", [], max_bytes=10) as path:
        assert open(path, "rb").read() == b"abc"
    assert not os.path.exists(path)
    with pytest.raises(InputTooLarge, match="over the 10-byte limit"):
        with local_video(None, b"x" * 11, [], max_bytes=10):
            pass
    with pytest.raises(VideoError, match="empty video"):
        with local_video(None, b"", [], max_bytes=10):
            pass
