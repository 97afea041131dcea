"""Exact values of the 8 metrics on small hand-made series, in both profiles."""
import math

import numpy as np
import pytest

from theval_mesh.pure.metrics import landmark_sets as S
from theval_mesh.pure.metrics.eyebrow import eyebrow_dynamics
from theval_mesh.pure.metrics.head_motion import head_motion
from theval_mesh.pure.metrics.lip_dynamics import lip_dynamics
from theval_mesh.pure.metrics.lip_sync import lip_sync, mouth_openness
from theval_mesh.pure.metrics.loudness import loudness_at, rms_envelope
from theval_mesh.pure.metrics.quality import mouth_box, pad_to_batch
from theval_mesh.pure.metrics.silent_lip import silent_lip_stability
from theval_mesh.pure.metrics.speech_frames import silent_frames, speech_mask

N = S.NUM_LANDMARKS_REFINED
NAN = float("nan")


def frames(count):
    return np.zeros((count, N, 2))


# ---------------------------------------------------------------- lip dynamics
def lip_series_one_point_moving(xs):
    """All lip points at the origin but LIPS[0], which moves along x: 39 of the 780
    distance series equal |x|, the other 741 are constant 0."""
    p = frames(len(xs))
    for t, x in enumerate(xs):
        if x is None:
            p[t] = np.nan
        else:
            p[t, S.LIPS[0], 0] = x
    return p


def test_lip_dynamics_reference_population_std():
    p = lip_series_one_point_moving([0, 1, 2])
    # std([0,1,2], ddof=0) = sqrt(2/3); 39 of 780 series -> sqrt(2/3)/20
    assert lip_dynamics(p) == pytest.approx(math.sqrt(2 / 3) / 20, rel=1e-12)


def test_lip_dynamics_paper_sample_std():
    p = lip_series_one_point_moving([0, 1, 2])
    assert lip_dynamics(p, "paper") == pytest.approx(1 / 20, rel=1e-12)


def test_lip_dynamics_skips_frames_without_face():
    p = lip_series_one_point_moving([0, None, 1, None, 2])
    assert lip_dynamics(p) == pytest.approx(math.sqrt(2 / 3) / 20, rel=1e-12)


def test_lip_dynamics_no_face_is_zero():
    assert lip_dynamics(lip_series_one_point_moving([None, None])) == 0.0


def test_lip_dynamics_reference_uses_every_frame():
    """The released reference reads until the end of the video and takes the population std over
    every frame with a face: Naturalness/lip_dynamics.py at 3603338, lines 67-74 (read loop until
    `cap.read()` fails), 92-96 (np.std over all kept shape vectors). No 500-frame cap."""
    p = lip_series_one_point_moving([0, 2, 5, 9])  # rows of frames 0, 499, 500 and 5000
    assert lip_dynamics(p) == pytest.approx(np.std([0, 2, 5, 9]) / 20, rel=1e-12)


# ---------------------------------------------------------------- head motion
def test_head_motion_exact():
    pitch, zeros = [0.0, 1.0, 3.0], [0.0, 0.0, 0.0]
    cx = [0.0, 0.0, 3.0]
    # A = std([0,1,3])/3 = sqrt(14/9)/3; D = var([1,2])/3 = 1/12; T = (var(cx)+0)/2 = 1
    expected = math.sqrt(math.sqrt(14 / 9) / 3 * (1 / 12) + 1.0)
    assert head_motion(pitch, zeros, zeros, cx, zeros) == pytest.approx(expected, rel=1e-12)


def test_head_motion_skips_missing_and_short_series_give_zero_terms():
    # one face frame: A = 0, D = 0 (fewer than 2 differences), T = 0 (one frame)
    assert head_motion([NAN, 5.0], [NAN, 1.0], [NAN, 2.0], [NAN, 9.0], [NAN, 9.0]) == 0.0
    # two frames: one difference -> D = 0, so score = sqrt(T)
    s = head_motion([0, 10], [0, 0], [0, 0], [0, 2], [0, 0])
    assert s == pytest.approx(math.sqrt((1.0 + 0.0) / 2))


def test_head_motion_no_face_is_nan_and_normalised_variant():
    assert math.isnan(head_motion([NAN], [NAN], [NAN], [NAN], [NAN]))
    # 1024x1024 frame, normalised to 512: translations halve, T quarters
    s = head_motion([0, 0], [0, 0], [0, 0], [0, 4], [0, 0], frame_size=(1024, 1024))
    assert s == pytest.approx(math.sqrt(1.0 / 2))


# ---------------------------------------------------------------- eyebrows
def brow_frame(d_left, d_right):
    """Eyes 10 px apart on the x axis; each brow centre d*10 px above its eye centre."""
    p = np.zeros((N, 2))
    p[list(S.LEFT_EYE)] = [10.0, 0.0]
    p[list(S.RIGHT_EYE)] = [0.0, 0.0]
    p[list(S.LEFT_BROW)] = [10.0, -10.0 * d_left]
    p[list(S.RIGHT_BROW)] = [0.0, -10.0 * d_right]
    return p


def test_eyebrow_reference_mean_abs_transition():
    p = np.stack([brow_frame(0.5, 0.5), brow_frame(0.6, 0.5), brow_frame(0.6, 0.7)])
    # left diffs 0.1, 0; right diffs 0, 0.2 -> 0.3 / 4
    assert eyebrow_dynamics(p) == pytest.approx(0.3 / 4)


def test_eyebrow_transitions_bridge_missing_and_degenerate_frames():
    degenerate = np.zeros((N, 2))  # eyes on top of each other: scale < 1e-3, skipped
    p = np.stack([brow_frame(0.5, 0.5), np.full((N, 2), np.nan), degenerate, brow_frame(0.7, 0.5)])
    assert eyebrow_dynamics(p) == pytest.approx(0.2 / 2)


def test_eyebrow_paper_sample_std_and_zero_without_transitions():
    p = np.stack([brow_frame(0.5, 0.5), brow_frame(0.6, 0.5), brow_frame(0.7, 0.5)])
    assert eyebrow_dynamics(p, "paper") == pytest.approx((0.1 + 0.0) / 2)
    assert eyebrow_dynamics(p[:1]) == 0.0


# ---------------------------------------------------------------- speech / silence frames
def test_speech_mask_int_bounds_inclusive_and_capped():
    m = speech_mask([(0.1, 0.3), (0.95, 2.0)], fps=10, total_frames=12)
    assert np.flatnonzero(m).tolist() == [1, 2, 3, 9, 10, 11]


def test_silent_frames_keep_runs_of_at_least_0_3_fps():
    # fps 10 -> runs of >= 3 frames; speech covers frames 2..3 and 7..7
    kept = silent_frames([(0.2, 0.3), (0.7, 0.7)], fps=10, total_frames=12)
    assert kept.tolist() == [4, 5, 6, 8, 9, 10, 11]  # run [0,1] is too short


# ---------------------------------------------------------------- silent-lip stability
def lip_gap_frame(gap):
    """Eye corners 33/263 100 px apart; every upper/lower inner pair `gap*100` px apart."""
    p = np.zeros((N, 2))
    p[33], p[263] = [0.0, 0.0], [100.0, 0.0]
    p[list(S.UPPER_INNER), 1] = 50.0
    p[list(S.LOWER_INNER), 1] = 50.0 + 100.0 * gap
    return p


def test_silent_lip_reference_median_abs_dev_from_mean():
    p = np.stack([lip_gap_frame(g) for g in (0.0, 0.0, 0.0, 0.4)])
    # mean 0.1 -> |d-mean| = .1,.1,.1,.3 -> median 0.1
    assert silent_lip_stability(p) == pytest.approx(0.1)
    # paper: median 0 -> |d-median| = 0,0,0,.4 -> median 0
    assert silent_lip_stability(p, "paper") == pytest.approx(0.0)


def test_silent_lip_nan_rules():
    assert math.isnan(silent_lip_stability(np.stack([lip_gap_frame(0.1)])))
    assert math.isnan(silent_lip_stability(np.zeros((0, N, 2))))
    degenerate = np.zeros((N, 2))  # eye distance 0 -> skipped
    assert math.isnan(silent_lip_stability(np.stack([lip_gap_frame(0.1), degenerate])))


# ---------------------------------------------------------------- lip-sync
def openness_frame(gap, eye_width=0.2):
    p = np.zeros((N, 2))
    p[list(S.EYE_CORNERS_RIGHT), 0] = 0.4
    p[list(S.EYE_CORNERS_LEFT), 0] = 0.4 + eye_width
    p[list(S.UPPER_INNER), 1] = 0.6
    p[list(S.LOWER_INNER), 1] = 0.6 + gap
    return p


def test_mouth_openness_normalised_by_eye_width():
    p = np.stack([openness_frame(0.02), openness_frame(0.05, eye_width=0.0), np.full((N, 2), np.nan)])
    o = mouth_openness(p)
    assert o[0] == pytest.approx(0.1)
    assert math.isnan(o[1]) and math.isnan(o[2])


def test_lip_sync_minmax_mean_abs_gap():
    o = np.array([0.0, 1.0, 2.0, NAN, 5.0])
    v = np.array([0.0, 2.0, 1.0, 1.0, 9.0])
    speech = np.array([True, True, True, True, False])
    # mask = frames 0..2: o* = 0, .5, 1 ; v* = 0, 1, .5 -> mean |diff| = 1/3
    assert lip_sync(o, v, speech, speech_ratio=0.8) == pytest.approx(1 / 3, rel=1e-6)


def test_lip_sync_nan_rules():
    o, v = np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0])
    assert math.isnan(lip_sync(o, v, np.array([True, True, True]), speech_ratio=0.09))
    assert math.isnan(lip_sync(o, v, np.array([True, False, False]), speech_ratio=0.5))


# ---------------------------------------------------------------- loudness
def test_rms_envelope_matches_librosa_layout():
    sr = 100  # window = hop = 5 samples, padded by 2 on each side
    y = np.arange(12, dtype=float)
    rms, times = rms_envelope(y, sr)
    padded = np.concatenate([[0, 0], y, [0, 0]])  # 16 samples -> 1 + (16-5)//5 = 3 windows
    expected = [np.sqrt(np.mean(padded[k * 5:k * 5 + 5] ** 2)) for k in range(3)]
    np.testing.assert_allclose(rms, expected)
    np.testing.assert_allclose(times, [0.0, 0.05, 0.10])
    # interpolated at frame times, held flat past the last window
    np.testing.assert_allclose(loudness_at(np.array([0.025, 0.5]), rms, times),
                               [(expected[0] + expected[1]) / 2, expected[2]])


# ---------------------------------------------------------------- quality helpers
def test_mouth_box_truncates_pads_and_clamps():
    p = np.full((N, 2), 0.5)
    p[list(S.LIPS), 0] = np.linspace(0.019, 0.5, len(S.LIPS))
    p[list(S.LIPS), 1] = np.linspace(0.5, 0.999, len(S.LIPS))
    # x: int(0.019*100)=1 -> max(1-10, 0)=0 ; int(50)=50 -> 60 ; y: 50-10=40 ; int(99.9)=99 -> min(109, 100)
    assert mouth_box(p, 100, 100) == (0, 40, 60, 100)


def test_pad_to_batch_top_left_on_black():
    a = np.full((2, 3, 3), 7, dtype=np.uint8)
    b = np.full((4, 1, 3), 9, dtype=np.uint8)
    out = pad_to_batch([a, b])
    assert out.shape == (2, 4, 3, 3)
    assert (out[0, :2, :3] == 7).all() and (out[0, 2:] == 0).all()
    assert (out[1, :, :1] == 9).all() and (out[1, :, 1:] == 0).all()
