"""Metric 5, head motion dynamics: sqrt(A*D + T) over the frames with a face."""
import numpy as np

# The optional resolution-normalised variant expresses the face centre as if the frame
# were this many pixels on each side (the THEval dataset's 512x512), so T no longer grows
# with the resolution of the video.
NORMALISED_FRAME_SIDE = 512.0


def _var_or_zero(x: np.ndarray) -> float:
    return float(np.var(x)) if len(x) > 1 else 0.0


def head_motion(pitch, yaw, roll, cx, cy, frame_size=None) -> float:
    """Angles in degrees, centre in original-frame pixels, NaN where no face.

    frame_size=(W, H) turns on the resolution-normalised translation term (off in `reference`).
    Returns NaN when no frame had a face (the reference code drops such videos).
    """
    series = np.array([pitch, yaw, roll, cx, cy], dtype=np.float64)
    series = series[:, ~np.isnan(series).any(axis=0)]
    if series.shape[1] == 0:
        return float("nan")
    angles, (x, y) = series[:3], series[3:]
    if frame_size is not None:
        w, h = frame_size
        x, y = x * NORMALISED_FRAME_SIDE / w, y * NORMALISED_FRAME_SIDE / h
    a = float(np.mean(np.std(angles, axis=1)))
    d = float(np.mean([_var_or_zero(np.diff(s)) for s in angles]))
    t = (_var_or_zero(x) + _var_or_zero(y)) / 2.0
    return float(np.sqrt(a * d + t))
