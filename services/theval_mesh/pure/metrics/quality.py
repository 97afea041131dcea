"""Pure helpers for the quality metrics: crop boxes and the reference's padded crop batches."""
import numpy as np

from theval_mesh.pure.metrics.landmark_sets import LIPS

BOX_PADDING_PX = 10
MOUTH_BATCH = 64
FRAME_BATCH = 64  # reference global_aesthetic.py; scores do not depend on it (no padding)
# Full frames waiting for a model batch: at most 64 1080p frames' worth of pixels (larger frames
# make smaller batches: 7 of 4096x4096), so a batch holds no more than the reference's at 1080p.
FRAME_BATCH_PIXELS = FRAME_BATCH * 1920 * 1080


def padded_box(points_norm: np.ndarray, width: int, height: int, indices=None,
               padding: int = BOX_PADDING_PX) -> tuple[int, int, int, int]:
    """Box (x0, y0, x1, y1) of the points in pixels, truncated to int, widened, clamped."""
    p = np.asarray(points_norm, dtype=np.float64)
    if indices is not None:
        p = p[list(indices)]
    xs = [int(x * width) for x in p[:, 0]]
    ys = [int(y * height) for y in p[:, 1]]
    return (max(min(xs) - padding, 0), max(min(ys) - padding, 0),
            min(max(xs) + padding, width), min(max(ys) + padding, height))


def mouth_box(points_norm, width, height):
    return padded_box(points_norm, width, height, LIPS)


def face_box(points_norm, width, height):
    return padded_box(points_norm, width, height)


def crop(frame: np.ndarray, box) -> np.ndarray:
    x0, y0, x1, y1 = box
    return frame[y0:y1, x0:x1]


def pad_to_batch(crops: list[np.ndarray]) -> np.ndarray:
    """Paste every crop at the top-left of a black canvas as large as the largest crop."""
    h = max(c.shape[0] for c in crops)
    w = max(c.shape[1] for c in crops)
    out = np.zeros((len(crops), h, w, crops[0].shape[2]), dtype=crops[0].dtype)
    for i, c in enumerate(crops):
        out[i, :c.shape[0], :c.shape[1]] = c
    return out


def batches(items: list, size: int = MOUTH_BATCH):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def mean_score(scores) -> float:
    scores = np.asarray(scores, dtype=np.float64)
    return float(scores.mean()) if len(scores) else float("nan")
