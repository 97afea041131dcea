"""The bad-input battery: every kind of bad input a probe sent, through the real evaluator, one
stream with good clips between them. Each bad input gets its own clean status (never INTERNAL,
a one-line detail), nothing hangs, every good clip in the same stream is scored, and every
service is still up and serving afterwards. The summary line is docs/security.md's figure."""
import os
import time

import grpc
import numpy as np
import pytest

from tests.support.mesh_support import Mesh
from tests.support.video_files import gradient, image_bytes, raw_h264, tone, write_video
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2
from theval_mesh.synth import generate_kit, write_bad_inputs

pytestmark = pytest.mark.slow
C = grpc.StatusCode
CLEAN = {C.OK, C.INVALID_ARGUMENT, C.RESOURCE_EXHAUSTED, C.PERMISSION_DENIED, C.NOT_FOUND}
HANG_S = 120
MAX_VIDEO_BYTES = 24 << 20  # the evaluator's --max-video-bytes: a 20 MB URI fits in a message


def _files(root, outside, good):
    """{label: VideoRef} of the bad inputs, files written under `root`."""
    refs = {}

    def uri(label, path):
        refs[label] = common_pb2.VideoRef(uri=str(path))

    for name, path in write_bad_inputs(root / "bad", size=128, duration_s=1.5).items():
        uri(name, path)
    for fmt, frames, kind in (("PNG", 1, "png"), ("JPEG", 1, "jpeg"), ("GIF", 1, "gif"), ("BMP", 1, "bmp"),
                              ("WEBP", 1, "webp"), ("TIFF", 1, "tiff"), ("GIF", 5, "animated_gif"),
                              ("PNG", 5, "apng")):
        (root / f"{kind}.mp4").write_bytes(image_bytes(fmt, frames, duration=100))
        uri(f"image {kind} named .mp4", root / f"{kind}.mp4")
    uri("raw H.264, header 64x64 then 8000x16 frames", raw_h264(root / "grow.mp4", [(64, 64, 10), (8000, 16, 2)]))
    uri("raw H.264 without duration", raw_h264(root / "raw.mp4", [(64, 48, 30)]))
    (root / "empty.mp4").write_bytes(b"")
    uri("empty file", root / "empty.mp4")
    (root / "random.mp4").write_bytes(np.random.default_rng(0).bytes(100_000))
    uri("random bytes", root / "random.mp4")
    data = good.read_bytes()
    (root / "head.mp4").write_bytes(data[:1000])
    uri("first 1000 bytes of a clip", root / "head.mp4")
    (root / "tail.mp4").write_bytes(data + np.random.default_rng(1).bytes(100_000))
    uri("a clip with 100 kB of garbage after it", root / "tail.mp4")
    uri("1-frame video", write_video(root / "one.mp4", gradient(1)))
    uri("2-frame video", write_video(root / "two.mp4", gradient(2)))
    audio = tone(1.0)
    audio[0, 4000:4100] = np.nan
    uri("NaN audio samples", write_video(root / "nan.mov", gradient(25), audio=audio, audio_codec="pcm_f32le",
                                         audio_format="flt"))
    (root / "folder.mp4").mkdir()
    uri("a folder named .mp4", root / "folder.mp4")
    os.mkfifo(root / "fifo.mp4")
    uri("a FIFO", root / "fifo.mp4")
    os.symlink(outside, root / "link.mp4")
    uri("a symlink out of the root", root / "link.mp4")
    uri("../ out of the root", f"{root}/../{outside.parent.name}/{outside.name}")
    uri("a file outside the roots", outside)
    uri("no such file", root / "nope.mp4")
    uri("relative path", "clip.mp4")
    uri("http URL", "http://example.org/clip.mp4")
    uri("file URL with a host", f"file://example.org{good}")
    uri("300-character file name", root / ("n" * 300 + ".mp4"))
    uri("5,000-character path", f"{root}/" + "d/" * 2500 + "clip.mp4")
    uri("1,100 folders deep", f"{root}/" + "x/" * 1100 + "clip.mp4")
    uri("NUL in the path", f"{root}/a\x00b.mp4")
    uri("%00 in the path", f"file://{root}/a%00b.mp4")
    uri("20 MB URI", f"{root}/" + "y" * (20 << 20))
    refs["bytes: text"] = common_pb2.VideoRef(content=b"not a video\n" * 100)
    refs["bytes: empty"] = common_pb2.VideoRef(content=b"")
    refs["bytes: a PNG"] = common_pb2.VideoRef(content=image_bytes("PNG"))
    refs["bytes: half a clip"] = common_pb2.VideoRef(content=data[:len(data) // 2])
    # Over the limit but under the message limit (limit + 1 MiB: larger messages are refused by
    # gRPC itself, which ends a stream).
    refs["bytes: over --max-video-bytes"] = common_pb2.VideoRef(content=b"\0" * (MAX_VIDEO_BYTES + 1000))
    return refs


@pytest.fixture(scope="module")
def battery(tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    outside = tmp_path_factory.mktemp("outside") / "clip.mp4"
    kit = generate_kit(root / "kit", seed=11, n_clips=2, duration_s=1.5, size=128, variants=())
    outside.write_bytes(kit.videos()[0].read_bytes())
    return kit.videos(), _files(root, outside, kit.videos()[0]), root


@pytest.fixture(scope="module")
def mesh(battery, tmp_path_factory):
    _, _, root = battery
    m = Mesh(tmp_path_factory.mktemp("mesh"), roots=[root], evaluator_args=["--max-video-bytes", str(MAX_VIDEO_BYTES)]).start()
    yield m
    m.stop()


def _code(number: int):
    return next(c for c in C if c.value[0] == number)


def test_every_bad_input_fails_alone_and_cleanly_and_the_good_ones_score(battery, mesh, figure):
    good, bad, _ = battery
    requests, answers, slow = [], {}, []
    for i, (label, ref) in enumerate(bad.items()):
        requests.append(evaluator_pb2.EvaluateRequest(id=label, video=ref))
        requests.append(evaluator_pb2.EvaluateRequest(id=f"good {i}", video=common_pb2.VideoRef(uri=str(good[i % 2]))))
    start = time.monotonic()
    for answer in mesh.evaluator.EvaluateStream(iter(requests), timeout=HANG_S * 5):
        answers[answer.id] = (_code(answer.code), answer.detail, answer.response.result)
    elapsed = time.monotonic() - start
    # Each bad input alone too: a unary call with its own deadline (a hang would show here).
    for label, ref in bad.items():
        t = time.monotonic()
        try:
            mesh.evaluator.Evaluate(evaluator_pb2.EvaluateRequest(video=ref), timeout=HANG_S)
            code, detail = C.OK, ""
        except grpc.RpcError as err:
            code, detail = err.code(), err.details() or ""
        if time.monotonic() - t > HANG_S / 2:
            slow.append(label)
        assert code == answers[label][0], (label, code, answers[label][:2])
        assert code in CLEAN, (label, code, detail[:300])
        assert "\n" not in detail and len(detail) <= 1000, (label, detail[:300])
    goods = [k for k in answers if k.startswith("good ")]
    assert len(answers) == len(requests), sorted(set(r.id for r in requests) - set(answers))  # none lost
    assert all(answers[k][0] == C.OK and answers[k][2].status == "ok" for k in goods)
    refused = {k: v for k, v in answers.items() if not k.startswith("good ") and v[0] != C.OK}
    for label, (code, detail, _) in refused.items():
        assert code in CLEAN and "Traceback" not in detail and len(detail) <= 1000, (label, code, detail[:300])
    assert not slow, f"took over {HANG_S / 2:.0f} s: {slow}"
    # Nothing crashed: every service is alive and the evaluator serves.
    assert all(p.alive() for p in mesh.procs.values())
    mesh.procs["evaluator"].wait_for("SERVING", 30)
    figure(f"bad-input battery: {len(bad)} bad inputs tried, {len(bad)} handled cleanly "
          f"({len(refused)} refused with a status, {len(bad) - len(refused)} scored with warnings or NaN "
          f"reasons), 0 lost, 0 hangs, {len(goods)} good clips between them all scored; stream "
          f"{elapsed:.0f} s")
