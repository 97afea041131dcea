"""Head pose from FaceMesh landmarks: a rigid fit to the video's own mean face shape.

The reference code uses FaceXFormer (weights not redistributable). Here each frame's 3-D
landmarks (x*W, y*H, z*W) are aligned (Umeyama: rotation, scale, translation) with a
reference shape: the generalised-Procrustes mean of the video's faces, expressed in a head
frame built from the eye corners and the forehead-to-nose-bridge line. Only landmarks that
expressions barely move are fitted (nose, eye corners, forehead, cheekbones, temples): the
mouth, jaw and brows are left out so that speech and brow raises do not read as head motion.

Angles are in degrees, axes x right, y down, z away from the camera. Roll is positive for a
counter-clockwise head tilt as seen in the image; pitch and yaw signs are conventional.
The face centre is the centre of the landmark bounding box in original-frame pixels.
"""
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from theval_mesh.backends.liveness import check
from theval_mesh.pure.geometry import umeyama

RIGID_FIT = "facemesh-rigid-fit"
BACKEND = f"{RIGID_FIT} v1 (per-video mean shape, Umeyama)"

RIGID = (1, 4, 5, 6, 168, 197, 195, 33, 133, 362, 263, 10, 151, 9, 234, 454, 93, 323,
         127, 356, 21, 251, 54, 284, 116, 345, 123, 352)


@dataclass
class HeadPose:
    pitch: np.ndarray
    yaw: np.ndarray
    roll: np.ndarray
    cx: np.ndarray
    cy: np.ndarray
    dropped: str | None = None  # why head motion is NaN for the whole video (a reference rule)


def _head_frame(shape: np.ndarray) -> np.ndarray:
    """Rows x, y, z of a head frame from a (N, 3) face shape."""
    x = shape[263] - shape[33]
    x /= np.linalg.norm(x)
    y = shape[6] - shape[10]
    y -= x * (y @ x)
    y /= np.linalg.norm(y)
    return np.stack([x, y, np.cross(x, y)])


def _mean_shape(faces: np.ndarray, iterations: int = 3) -> np.ndarray:
    ref = faces[0]
    for _ in range(iterations):
        aligned = []
        for f in faces:
            s, r, t = umeyama(f[list(RIGID)], ref[list(RIGID)])
            aligned.append((s * (r @ f.T)).T + t)
        ref = np.mean(aligned, axis=0)
    return ref


def estimate(points: np.ndarray, width: int, height: int, cancelled=None) -> HeadPose:
    """points: (T, N, 3) normalised FaceMesh output, NaN rows where no face; cancelled:
    backends.liveness, checked per frame."""
    t_count = len(points)
    out = {k: np.full(t_count, np.nan) for k in ("pitch", "yaw", "roll", "cx", "cy")}
    has_face = ~np.isnan(points[:, 0, 0]) if t_count else np.zeros(0, bool)
    if not has_face.any():
        return HeadPose(**out)
    px = points[has_face].astype(np.float64) * np.array([width, height, width])
    mean = _mean_shape(px)
    canon = _head_frame(mean)
    ref = mean[list(RIGID)] - mean[list(RIGID)].mean(0)
    angles = []
    for face in px:
        check(cancelled)
        _, r, _ = umeyama(ref, face[list(RIGID)])
        z, y, x = Rotation.from_matrix(r @ canon.T).as_euler("ZYX", degrees=True)
        angles.append((x, y, -z))  # y points down: a counter-clockwise tilt is a negative z turn
    angles = np.array(angles)
    out["pitch"][has_face], out["yaw"][has_face], out["roll"][has_face] = angles.T
    xs, ys = px[:, :, 0], px[:, :, 1]
    out["cx"][has_face] = (xs.min(1) + xs.max(1)) / 2
    out["cy"][has_face] = (ys.min(1) + ys.max(1)) / 2
    return HeadPose(**out)
