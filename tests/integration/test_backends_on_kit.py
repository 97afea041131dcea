"""Real MediaPipe, head pose and Silero on the synthetic kit, against its known driving signals."""
import numpy as np
import pytest

from theval_mesh.backends.audio.backend import AudioBackend
from theval_mesh.backends.audio.resample import resample
from theval_mesh.backends.headpose.backend import estimate
from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.landmarks.backend import FaceTracker
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.metrics.lip_sync import mouth_openness
from theval_mesh.pure.metrics.speech_frames import speech_mask

pytestmark = pytest.mark.slow


def track(path):
    reader = MediaReader(path)
    with FaceTracker(passes.SINGLE) as t:
        pts = [t.process(f) for _, f in reader.frames()]
    arr = np.stack([p if p is not None else np.full((478, 3), np.nan, np.float32) for p in pts])
    return arr, reader


@pytest.fixture(scope="module")
def tracked(kit):
    return {(v, c): track(kit.video(v, c)) for v in ("gt", "static_head") for c in kit.clips}


def test_face_found_in_at_least_95_percent_of_frames(kit, tracked):
    for c in kit.clips:
        pts, _ = tracked[("gt", c)]
        assert np.mean(~np.isnan(pts[:, 0, 0])) >= 0.95, c


def test_mouth_openness_follows_the_driving_signal(kit, tracked):
    for c in kit.clips:
        pts, _ = tracked[("gt", c)]
        drive = kit.signals(c)["mouth"][: len(pts)]
        o = mouth_openness(pts[:, :, :2])
        ok = ~np.isnan(o)
        assert np.corrcoef(o[ok], drive[ok])[0, 1] >= 0.8, c


def test_head_roll_within_2_degrees_rms(kit, tracked):
    for c in kit.clips:
        pts, _ = tracked[("gt", c)]
        still, _ = tracked[("static_head", c)]
        # the photo's own tilt is unknown: measure it on the same clip without head motion
        offset = np.nanmean(estimate(still, kit.size, kit.size).roll)
        roll = estimate(pts, kit.size, kit.size).roll - offset
        truth = kit.signals(c)["roll"][: len(roll)]
        ok = ~np.isnan(roll)
        rms = float(np.sqrt(np.mean((roll[ok] - truth[ok]) ** 2)))
        assert rms <= 2.0, (c, rms)


# How far silero's segment edges can sit from the truth: 5.1.2 rounds them to 0.1 s (0.05 s),
# pads speech by 30 ms, and sees audio in 512-sample windows (32 ms at 16 kHz).
EDGE_S = 0.05 + 0.030 + 512 / 16000


def test_vad_silences_match_the_generated_pauses_within_silero_resolution(kit, tracked):
    vad = AudioBackend()
    for c in kit.clips:
        _, reader = tracked[("gt", c)]
        found, = vad.speech_segments(resample(reader.audio.samples, reader.audio.rate, 16000))
        truth = kit.signals(c)["speech"]
        assert len(found) == len(truth), (c, found, truth)
        # pauses = gaps between consecutive segments
        for (_, e1), (s2, _), (_, t1), (u2, _) in zip(found, found[1:], truth, truth[1:]):
            assert abs(e1 - t1) <= EDGE_S and abs(s2 - u2) <= EDGE_S, (c, found, truth)


def test_speech_frames_cover_speech(kit, tracked):
    c = kit.clips[0]
    _, reader = tracked[("gt", c)]
    truth = kit.signals(c)["speech"]
    mask = speech_mask(truth, reader.info.fps, reader.frame_count)
    assert 0.3 < mask.mean() < 0.95
