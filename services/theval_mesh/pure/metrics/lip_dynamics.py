"""Metric 4, lip dynamics: mean over the 780 lip-point distance series of their std over time."""
from itertools import combinations

import numpy as np

from theval_mesh.pure.metrics.landmark_sets import LIPS
from theval_mesh.pure.metrics.profiles import REFERENCE, std_ddof
from theval_mesh.pure.metrics.series import face_rows

_PAIRS = np.array(list(combinations(range(len(LIPS)), 2)))  # 780 pairs, in the reference order


def lip_dynamics(points_256: np.ndarray, profile: str = REFERENCE) -> float:
    """points_256: (T, N, 2) landmarks in 256x256 pixel units of every used frame, NaN rows where
    no face. Every frame counts (the reference reads to the end of the video: no frame cap).
    Returns 0.0 when no frame had a face (as the reference code does).
    """
    ddof = std_ddof(profile)
    points_256 = np.asarray(points_256, dtype=np.float64)
    keep = face_rows(points_256)
    lips = points_256[keep][:, list(LIPS), :]
    if len(lips) == 0:
        return 0.0
    if len(lips) <= ddof:
        return float("nan")
    dists = np.linalg.norm(lips[:, _PAIRS[:, 0], :] - lips[:, _PAIRS[:, 1], :], axis=2)
    return float(np.mean(np.std(dists, axis=0, ddof=ddof)))
