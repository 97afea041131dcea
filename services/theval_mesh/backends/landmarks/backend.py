"""Landmarks backend: MediaPipe legacy FaceMesh, one tracking instance per video and pass."""
import threading

import cv2
import mediapipe as mp
import numpy as np
from mediapipe.framework.formats import landmark_pb2
from mediapipe.python._framework_bindings import _packet_getter

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
            return self._first_face(image)

    def _first_face(self, image: np.ndarray) -> bytes | None:
        """The first face's serialized NormalizedLandmarkList, or None. What FaceMesh.process
        does (mediapipe 0.10.21's solution_base.process: the same packet, timestamp and wait)
        without what we would not read: it builds a namedtuple class and parses every face into a
        Python message on each call, a third of a millisecond with the GIL held, five passes per
        frame. tests/unit/test_landmark_points.py checks it against FaceMesh.process."""
        m = self._mesh
        m._graph_outputs.clear()
        m._simulated_timestamp += 33333
        m._graph.add_packet_to_input_stream(
            stream=_INPUT, packet=m._make_packet(m._input_stream_type_info[_INPUT], image).at(m._simulated_timestamp))
        m._graph.wait_until_idle()
        packet = m._graph_outputs.get(_OUTPUT)
        if packet is None or packet.is_empty():
            return None
        faces = _packet_getter._get_serialized_proto_list(packet)
        return faces[0] if faces else None

    def process(self, rgb: np.ndarray) -> np.ndarray | None:
        image = rgb
        if self.mesh_pass.resize_256:
            image = cv2.resize(image, (256, 256))  # cv2's default bilinear, as the reference
        if self.mesh_pass.bgr:  # the same bytes as image[:, :, ::-1], ~70x faster than numpy's copy of that view
            image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
        image = np.ascontiguousarray(image)
        face = self._first_face(image) if self._mesh else self._start(image)
        return None if face is None else points_of(face)

    def close(self):
        if self._mesh:
            self._mesh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_INPUT, _OUTPUT = "image", "multi_face_landmarks"  # FaceMesh's graph streams

# A NormalizedLandmarkList as MediaPipe serializes FaceMesh's: per point, field 1 (tag 0x0a) of 15
# bytes holding x, y, z as float32 fields 1-3 (tags 0x0d, 0x15, 0x1d), nothing else.
_WIRE = np.dtype([("tag", "u1"), ("size", "u1"), ("tx", "u1"), ("x", "<f4"), ("ty", "u1"), ("y", "<f4"),
                  ("tz", "u1"), ("z", "<f4")])
_WIRE_TAGS = {"tag": 0x0A, "size": 15, "tx": 0x0D, "ty": 0x15, "tz": 0x1D}


def points_of(data: bytes) -> np.ndarray:
    """(N, 3) float32 x, y, z of a serialized NormalizedLandmarkList. Read from its wire bytes:
    the same floats as reading each point's attributes (a test checks), a tenth of the time with
    the GIL held, 5 passes per frame; any other layout (a field added) reads the attributes."""
    if len(data) % _WIRE.itemsize == 0:
        rows = np.frombuffer(data, _WIRE)
        if all((rows[k] == v).all() for k, v in _WIRE_TAGS.items()):
            return np.stack([rows["x"], rows["y"], rows["z"]], axis=1)
    landmarks = landmark_pb2.NormalizedLandmarkList.FromString(data)
    return np.array([(p.x, p.y, p.z) for p in landmarks.landmark], dtype=np.float32)
