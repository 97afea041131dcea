"""Metric 6, eyebrow dynamics: how much the brow-to-eye distance moves between face frames."""
import numpy as np

from theval_mesh.pure.metrics.landmark_sets import LEFT_BROW, LEFT_EYE, RIGHT_BROW, RIGHT_EYE
from theval_mesh.pure.metrics.profiles import REFERENCE, check_profile
from theval_mesh.pure.metrics.series import centre, face_rows

MIN_EYE_DISTANCE = 1e-3


def brow_distances(points_px: np.ndarray) -> np.ndarray:
    """(T, N, 2) full-frame pixels -> (K, 2) normalised [left, right] brow-eye distances.

    Frames without a face, or whose eyes are closer than 1e-3 px, are dropped: they
    neither count nor reset the previous value.
    """
    points_px = np.asarray(points_px, dtype=np.float64)[face_rows(points_px)]
    if len(points_px) == 0:
        return np.zeros((0, 2))
    eye_l, eye_r = centre(points_px, LEFT_EYE), centre(points_px, RIGHT_EYE)
    brow_l, brow_r = centre(points_px, LEFT_BROW), centre(points_px, RIGHT_BROW)
    scale = np.linalg.norm(eye_l - eye_r, axis=1)
    ok = scale >= MIN_EYE_DISTANCE
    d_left = np.linalg.norm(brow_l - eye_l, axis=1)[ok] / scale[ok]
    d_right = np.linalg.norm(brow_r - eye_r, axis=1)[ok] / scale[ok]
    return np.stack([d_left, d_right], axis=1)


def eyebrow_dynamics(points_px: np.ndarray, profile: str = REFERENCE) -> float:
    d = brow_distances(points_px)
    if check_profile(profile) == REFERENCE:
        if len(d) < 2:
            return 0.0
        return float(np.abs(np.diff(d, axis=0)).sum() / (2 * (len(d) - 1)))
    if len(d) < 2:
        return float("nan")
    return float(np.mean(np.std(d, axis=0, ddof=1)))
