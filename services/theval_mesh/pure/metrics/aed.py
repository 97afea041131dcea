"""AED as First Order Motion Model's evaluation computes it (AliaksandrSiarohin/pose-evaluation at
1bc4cae): an IDENTITY distance, not an expression one (docs/classic-metrics.md lists the other
meanings of the name). extract.py:69-94 embeds every whole frame with OpenFace
(backends/classic/openface.py), then cmp.py:

- frames are paired by file name and frame number, every frame of both videos (it asserts that the
  two tables have the same shape; here the common frames are compared and the rest counted);
- a frame's distance is the SUM of squared differences of the two 128-d unit-length embeddings
  (cmp.py:27: |a - b| in float32, then squared in float64): the squared Euclidean distance;
- AED is the mean over all frames of all videos (a long video weighs more: akd.frame_weighted).
Pure: arrays in, numbers out.
"""
import numpy as np


def frame_distance(gt: np.ndarray, generated: np.ndarray) -> float:
    """cmp.py:27: np.sum(np.abs(a - b).astype(float) ** 2) of two frames' embeddings."""
    return float(np.sum(np.abs(np.asarray(gt) - np.asarray(generated)).astype(np.float64) ** 2))


def embedding_distances(gt: list, generated: list) -> np.ndarray:
    """The per-frame distances of one video pair, over the frames both videos have."""
    return np.array([frame_distance(g, p) for g, p in zip(gt, generated)], np.float64)
