"""Metric 7, silent-lip stability: spread of the inner-lip gap over long silences."""
import numpy as np

from theval_mesh.pure.metrics.landmark_sets import LOWER_INNER, OUTER_EYE_CORNERS, UPPER_INNER
from theval_mesh.pure.metrics.profiles import REFERENCE, check_profile
from theval_mesh.pure.metrics.series import face_rows

MIN_EYE_DISTANCE = 1e-3


def lip_gaps(points_256: np.ndarray) -> np.ndarray:
    """(T, N, 2) in 256-scale px -> (K,) mean |y_upper - y_lower| / eye distance per usable frame."""
    points_256 = np.asarray(points_256, dtype=np.float64)[face_rows(points_256)]
    if len(points_256) == 0:
        return np.zeros(0)
    a, b = OUTER_EYE_CORNERS
    eye = np.linalg.norm(points_256[:, a] - points_256[:, b], axis=1)
    ok = eye >= MIN_EYE_DISTANCE
    gap = np.abs(points_256[:, list(UPPER_INNER), 1] - points_256[:, list(LOWER_INNER), 1])
    return (gap[ok] / eye[ok, None]).mean(axis=1)


def silent_lip_stability(points_256_silent: np.ndarray, profile: str = REFERENCE) -> float:
    """Landmarks of the kept silent frames only. NaN with fewer than 2 usable frames."""
    d = lip_gaps(points_256_silent)
    if len(d) < 2:
        return float("nan")
    centre = np.mean(d) if check_profile(profile) == REFERENCE else np.median(d)
    return float(np.median(np.abs(d - centre)))
