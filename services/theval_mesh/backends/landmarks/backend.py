"""Landmarks backend: MediaPipe legacy FaceMesh, one tracking instance per video and pass."""
import threading

import cv2
import mediapipe as mp
import numpy as np

from theval_mesh.backends.landmarks.name import BACKEND
from theval_mesh.backends.landmarks.passes import MeshPass
from theval_mesh.backends.native_logs import quiet_native_stderr

__all__ = ["BACKEND", "FaceTracker"]
# The quiet window redirects the whole process's stderr: one graph start at a time.
_START_LOCK = threading.Lock()


class FaceTracker:
    """Feed the frames of ONE video in order; each call returns (N, 3) normalised points or None."""

    def __init__(self, mesh_pass: MeshPass):
        self.mesh_pass = mesh_pass
        self.num_points = 478 if mesh_pass.refine else 468
        self._mesh = None

    def _start(self, image):
        # The graph's threads print start-up lines until its first frame is through: create it
        # and run that frame inside one quiet window.
        with _START_LOCK, quiet_native_stderr():
            p = self.mesh_pass
            self._mesh = mp.solutions.face_mesh.FaceMesh(
                static_image_mode=p.static, max_num_faces=1, refine_landmarks=p.refine,
                min_detection_confidence=0.5, min_tracking_confidence=0.5)
            return self._mesh.process(image)

    def process(self, rgb: np.ndarray) -> np.ndarray | None:
        image = rgb
        if self.mesh_pass.resize_256:
            image = cv2.resize(image, (256, 256))  # cv2's default bilinear, as the reference
        if self.mesh_pass.bgr:
            image = image[:, :, ::-1]
        image = np.ascontiguousarray(image)
        result = self._mesh.process(image) if self._mesh else self._start(image)
        if not result.multi_face_landmarks:
            return None
        lm = result.multi_face_landmarks[0].landmark
        return np.array([(p.x, p.y, p.z) for p in lm], dtype=np.float32)

    def close(self):
        if self._mesh:
            self._mesh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
