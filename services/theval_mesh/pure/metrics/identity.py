"""Identity similarity (CSIM): the cosine similarity of face-recognition embeddings of each
generated frame's face and of the source identity, averaged over frames. Pure: landmarks and
embeddings in, numbers out (backends/classic/arcface.py runs the network).

Faces are aligned the insightface way (`insightface.utils.face_align.norm_crop`): the similarity
transform (rotation, uniform scale, translation; least squares, Umeyama) taking the face's five
points (eye centres, nose tip, mouth corners, in image order left to right) to ArcFace's 112x112
template, then an affine warp with a black border.
"""
import numpy as np

from theval_mesh.pure.geometry import umeyama

ALIGNED = 112
# ArcFace's 5-point template in a 112x112 crop (image-left eye, image-right eye, nose tip,
# image-left mouth corner, image-right mouth corner): insightface face_align.arcface_dst
ARCFACE_DST = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                        [41.5493, 92.3655], [70.7299, 92.2041]])
# The five points from MediaPipe FaceMesh's 478 (refined) points: the iris centres 468 (the
# subject's right eye, on the image's left) and 473, the nose tip 1, the mouth corners 61 and 291.
FACEMESH_FIVE = (468, 473, 1, 61, 291)


def alignment(points5: np.ndarray) -> np.ndarray:
    """The 2x3 affine matrix taking the five points (pixels) to ARCFACE_DST."""
    s, r, t = umeyama(points5, ARCFACE_DST)
    return np.hstack([s * r, t[:, None]])


def five_points(facemesh_px: np.ndarray) -> np.ndarray:
    """(5, 2) points in pixels from FaceMesh's (478, >=2) points in pixels."""
    return np.asarray(facemesh_px, float)[list(FACEMESH_FIVE), :2]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of a with b (or row by row when both are 2-D of one shape)."""
    a, b = np.atleast_2d(np.asarray(a, float)), np.atleast_2d(np.asarray(b, float))
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# Identity drift: CSIM per consecutive span of the video, the first span's minus the last's.
DRIFT_SEGMENT_S = 5.0


def segment_similarities(cosines: np.ndarray, frames: np.ndarray, fps: float,
                         segment_s: float = DRIFT_SEGMENT_S) -> list[float]:
    """The mean cosine of each consecutive segment_s-second span of the video (frame index / fps;
    spans from 0 s) that has a frame with a face, in order."""
    cosines, frames = np.asarray(cosines, float), np.asarray(frames)
    span = np.floor(frames / fps / segment_s).astype(int)
    return [float(cosines[span == k].mean()) for k in np.unique(span)]


def drift(similarities: list[float]) -> float:
    """The first span's CSIM minus the last's: how much identity a long video loses (> 0) from its
    start to its end; NaN with fewer than two spans."""
    return similarities[0] - similarities[-1] if len(similarities) >= 2 else float("nan")
