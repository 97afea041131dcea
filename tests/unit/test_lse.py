"""LSE-C / LSE-D: the offset search and the two numbers on known features (pure/metrics/lse.py),
syncnet_python's face tracks and crop windows on known boxes (pure/metrics/face_tracks.py), and
SyncNet's strict loading (backends/classic/syncnet.py). No weights needed: the answers here do not
depend on them. The whole pipeline against syncnet_python's own code:
tests/integration/test_syncnet_parity.py."""
import numpy as np
import pytest
import torch

from theval_mesh.backends.classic import syncnet
from theval_mesh.pure.errors import WeightsMissing
from theval_mesh.pure.metrics import face_tracks as ft
from theval_mesh.pure.metrics import lse


def _shifted(delay: int, n: int = 80, dim: int = 16, seed: int = 0):
    """Video features and audio features that lag them by `delay` windows (audio window m carries
    video window m - delay), plus a little noise."""
    rng = np.random.default_rng(seed)
    video = rng.normal(size=(n, dim))
    audio = np.roll(video, delay, axis=0) + rng.normal(scale=0.05, size=(n, dim))
    return video, audio


@pytest.mark.parametrize("delay", [-7, -1, 0, 3, 12])
def test_the_offset_search_finds_a_known_delay(delay):
    video, audio = _shifted(delay)
    s = lse.sync(lse.shift_distances(video, audio))
    # syncnet_python's sign: audio late by d windows gives AV offset -d
    assert s.offset == -delay
    assert s.lse_c > 2.0 and s.lse_d < 0.25 * (s.lse_d + s.lse_c)  # a clear minimum: under a quarter of the median
    assert s.windows == 80


def test_no_relation_gives_low_confidence():
    rng = np.random.default_rng(1)
    s = lse.sync(lse.shift_distances(rng.normal(size=(200, 16)), rng.normal(size=(200, 16))))
    sharp = lse.sync(lse.shift_distances(*_shifted(2, n=200)))
    assert s.lse_c < 0.1 * sharp.lse_c and s.lse_d > 3 * sharp.lse_d


def test_distances_are_torch_pairwise_distances_over_zero_padded_audio():
    """calc_pdist of SyncNetInstance.py, written with torch as there, equals ours."""
    rng = np.random.default_rng(2)
    video, audio = rng.normal(size=(30, 8)), rng.normal(size=(30, 8))
    v, a, shift = torch.tensor(video), torch.tensor(audio), 4
    padded = torch.nn.functional.pad(a, (0, 0, shift, shift))
    theirs = torch.stack([torch.nn.functional.pairwise_distance(v[[i], :].repeat(2 * shift + 1, 1),
                                                                padded[i:i + 2 * shift + 1, :]) for i in range(30)])
    np.testing.assert_allclose(lse.shift_distances(video, audio, shift), theirs.numpy(), rtol=1e-12)
    mean = theirs.mean(0)
    minval, idx = torch.min(mean, 0)
    s = lse.sync(theirs.numpy(), shift)
    assert s.offset == shift - int(idx)
    assert s.lse_d == pytest.approx(float(minval)) and s.lse_c == pytest.approx(float(torch.median(mean) - minval))


def test_windows_follow_the_shorter_of_frames_and_audio():
    assert lse.windows(100, 100 * 640) == 95
    assert lse.windows(100, 50 * 640 + 639) == 45
    assert lse.windows(4, 10 * 640) == 0


def _moving_face(frames, size=150.0, start=0):
    return [[] if f < start else [(100.0 + f, 80.0, 100.0 + f + size, 80.0 + size)] for f in range(frames)]


def test_a_face_seen_long_enough_is_one_interpolated_track():
    detections = _moving_face(130)
    for f in (40, 41, 42):  # missed detections are interpolated
        detections[f] = []
    (track,) = ft.tracks(detections)
    assert list(track.frames) == list(range(130))
    np.testing.assert_allclose(track.boxes[41], (141.0, 80.0, 291.0, 230.0))


def test_short_small_and_interrupted_faces_are_no_track():
    assert ft.tracks(_moving_face(100)) == []                 # 100 detections: not more than min_track
    assert ft.tracks(_moving_face(130, size=90.0)) == []      # smaller than min_face_size
    gap = _moving_face(260)
    for f in range(110, 140):                                 # 30 missed frames > num_failed_det
        gap[f] = []
    assert [(t.frames[0], t.frames[-1]) for t in ft.tracks(gap)] == [(0, 109), (140, 259)]


def test_two_faces_make_two_tracks():
    left, right = _moving_face(120), _moving_face(120)
    both = [a + [(b[0][0] + 400, b[0][1], b[0][2] + 400, b[0][3])] for a, b in zip(left, right, strict=True)]
    tracks = ft.tracks(both)
    assert len(tracks) == 2 and {round(t.boxes[0][0]) for t in tracks} == {100, 500}


def test_mochabench_ends_a_frames_scan_at_a_face_that_does_not_overlap():
    """Face A alone in frame 0, then [B far away, A moved on] in every frame: track_shot skips B and
    keeps following A from frame 0; MoChaBench's _track stops the frame's scan at B, so A's frame 0
    stays alone and A is found again from frame 1."""
    a = _moving_face(120)
    frames = [a[0]] + [[(a[f][0][0] + 400, a[f][0][1], a[f][0][2] + 400, a[f][0][3]), a[f][0]]
                            for f in range(1, 120)]
    spans = sorted((int(t.frames[0]), int(t.frames[-1]), round(t.boxes[-1][0])) for t in ft.tracks(frames))
    assert spans == [(0, 119, 219), (1, 119, 619)]
    spans = sorted((int(t.frames[0]), int(t.frames[-1]), round(t.boxes[-1][0]))
                   for t in ft.tracks(frames, iou_eps=1e-8, stop_at_mismatch=True))
    assert spans == [(1, 119, 219), (1, 119, 619)]


def test_crop_window_is_the_box_widened_and_stretched_down():
    # box half-size 50 centred at (200, 150): pad int(50 * 1.8) = 90; rows from y - s to y + 1.8 s,
    # columns x +- 1.4 s, in padded coordinates
    pad, (rows, cols) = ft.crop_slices(50.0, 150.0, 200.0)
    assert pad == 90
    assert (rows.start, rows.stop, cols.start, cols.stop) == (190, 330, 220, 360)


def test_crop_windows_are_median_smoothed():
    track = ft.Track(np.arange(20), np.array([[0, 0, 100, 100]] * 20, float))
    track.boxes[7] = (0, 0, 300, 300)  # one outlier box
    windows = ft.crop_windows(track)
    assert windows[7, 0] == 50.0 and windows[7, 1] == 50.0


def test_syncnet_loads_its_file_strictly(tmp_path):
    state = syncnet.stand_in_state(0)
    assert not any(k.endswith("num_batches_tracked") for k in state)  # as the 2017 file
    net = syncnet.load_state(syncnet.SyncNet(), {k: torch.as_tensor(v) for k, v in state.items()}, "x")
    assert not net.training
    with pytest.raises(WeightsMissing, match="missing"):
        syncnet.load_state(syncnet.SyncNet(), {k: v for k, v in state.items() if k != "netfcaud.0.bias"}, "x")
    with pytest.raises(WeightsMissing, match="unknown"):
        syncnet.load_state(syncnet.SyncNet(), {**state, "extra.weight": np.zeros(1)}, "x")
    bad = dict(state, **{"netcnnlip.0.weight": np.zeros((96, 3, 5, 7, 6), np.float32)})
    with pytest.raises(WeightsMissing, match="other shapes"):
        syncnet.load_state(syncnet.SyncNet(), bad, "x")


def test_syncnet_shapes_and_windows():
    net = syncnet.SyncNet().eval()
    crops = np.random.default_rng(0).integers(0, 255, (12, 224, 224, 3), dtype=np.uint8)
    pcm = (np.random.default_rng(1).normal(size=12 * 640) * 1000).astype(np.int16)
    f = syncnet.features(net, crops, pcm)
    assert f.video.shape == (7, 1024) and f.audio.shape == (7, 1024)
    assert syncnet.evaluate(net, crops[:5], pcm) is None  # no 5-frame window
    assert syncnet.mfcc(pcm).shape[0] == 13
