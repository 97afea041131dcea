"""Metric 8, lip-sync: mean gap between min-max normalised mouth opening and audio loudness."""
import numpy as np

from theval_mesh.pure.metrics.landmark_sets import EYE_CORNERS_LEFT, EYE_CORNERS_RIGHT, LOWER_INNER, UPPER_INNER

MIN_SPEECH_RATIO = 0.1
EPS = 1e-8


def mouth_openness(points_norm: np.ndarray) -> np.ndarray:
    """(T, N, 2) NORMALISED coordinates -> (T,) openness; NaN where no face or zero eye width."""
    p = np.asarray(points_norm, dtype=np.float64)
    upper = p[:, list(UPPER_INNER), 1].mean(axis=1)
    lower = p[:, list(LOWER_INNER), 1].mean(axis=1)
    width = np.abs(p[:, list(EYE_CORNERS_LEFT), 0].mean(axis=1)
                   - p[:, list(EYE_CORNERS_RIGHT), 0].mean(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.abs(upper - lower) / width
    o[~(width > 0)] = np.nan
    return o


def _minmax(x: np.ndarray) -> np.ndarray:
    return (x - x.min()) / (x.max() - x.min() + EPS)


def lip_sync(openness: np.ndarray, loudness: np.ndarray, speech: np.ndarray,
             speech_ratio: float) -> float:
    """openness, loudness (RMS at each frame time) and speech (bool) over the frames used.

    speech_ratio is the share of ALL video frames covered by speech. NaN when it is under
    10 % or fewer than 2 speech frames have a face.
    """
    o = np.asarray(openness, dtype=np.float64)
    v = np.asarray(loudness, dtype=np.float64)
    mask = np.asarray(speech, dtype=bool) & ~np.isnan(o)
    if speech_ratio < MIN_SPEECH_RATIO or mask.sum() < 2:
        return float("nan")
    return float(np.mean(np.abs(_minmax(o[mask]) - _minmax(v[mask]))))
