"""Helpers for per-frame series where a frame without a face is a row of NaN."""
import numpy as np


def face_rows(points: np.ndarray) -> np.ndarray:
    """Boolean mask of frames (first axis) that hold a face, i.e. no NaN in the row."""
    points = np.asarray(points, dtype=np.float64)
    if points.ndim == 1:
        return ~np.isnan(points)
    return ~np.isnan(points).reshape(len(points), -1).any(axis=1) if len(points) else np.zeros(0, bool)


def centre(points: np.ndarray, indices) -> np.ndarray:
    """Mean position of `indices` per frame: (T, N, 2) -> (T, 2)."""
    return np.asarray(points, dtype=np.float64)[:, list(indices), :].mean(axis=1)
