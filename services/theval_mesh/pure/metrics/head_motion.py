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


# Naturalness/head_motion_dynamics.py (Newbyl/THEval 3603338) reads frames in batches of 128
# (line 27) until OpenCV's frame count (lines 123, 132); a read that fails before that count breaks
# the loop before the pending partial batch is scored (lines 133-135 vs 143).
REFERENCE_BATCH = 128


def reference_frame_count(decoded: int, header: int) -> int:
    """How many leading frames the reference's head-motion script scores."""
    if decoded >= header:
        return header
    return decoded - decoded % REFERENCE_BATCH


def reference_drop_reason(face_found, decoded: int, header: int) -> tuple[int, str | None]:
    """(frames the reference scores, why it drops the whole video or None). One frame without a
    face drops the video: retina-face returns {} (a dict), `faces[next(iter(faces))]` raises
    StopIteration (lines 42-43), caught per video (lines 216-219), so it gets no row at all."""
    n = reference_frame_count(decoded, header)
    if n == 0:
        return 0, "no frame the reference's head-motion script would read (frame count 0)"
    missing = [i for i, found in enumerate(face_found[:n]) if not found]
    if missing:
        return n, (f"no face in frame {missing[0]} ({len(missing)} of {n} frames): the reference's "
                   "head-motion script drops such a video")
    return n, None
