"""FaceMesh's points are read from the landmark list's wire bytes: the same float32 values as
reading each point's attributes, on a real FaceMesh result and on lists of other layouts."""
import numpy as np
from mediapipe.framework.formats import landmark_pb2

from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.landmarks.backend import FaceTracker, points_of


def _by_attributes(landmarks) -> np.ndarray:
    return np.array([(p.x, p.y, p.z) for p in landmarks.landmark], dtype=np.float32)


def test_a_real_facemesh_result_reads_the_same_from_its_bytes(tmp_path):
    from theval_mesh.backends.media.decode import MediaReader
    from theval_mesh.synth import generate_kit
    generate_kit(tmp_path, seed=2, n_clips=1, duration_s=1.5, size=192)
    video = sorted(tmp_path.rglob("*.mp4"))[0]
    frames = [f for _, f in MediaReader(video).frames()][:4]
    checked = 0
    for mesh_pass in (passes.SINGLE, passes.LIP_SYNC_REFERENCE):
        with FaceTracker(mesh_pass) as tracker:
            tracker.process(frames[0])
            for frame in frames[1:]:
                result = tracker._mesh.process(np.ascontiguousarray(frame))
                if result.multi_face_landmarks:
                    got = points_of(result.multi_face_landmarks[0])
                    assert got.shape == (tracker.num_points, 3) and got.dtype == np.float32
                    assert np.array_equal(got, _by_attributes(result.multi_face_landmarks[0]))
                    checked += 1
    assert checked >= 4


def test_other_layouts_fall_back_to_the_attributes():
    plain = landmark_pb2.NormalizedLandmarkList()
    for x in (0.0, -1.5, 3.25e-8):  # zeros are still written (proto2: set fields are sent)
        plain.landmark.add(x=x, y=0.5, z=-0.0)
    assert np.array_equal(points_of(plain), _by_attributes(plain))
    extra = landmark_pb2.NormalizedLandmarkList()
    extra.landmark.add(x=0.1, y=0.2, z=0.3, visibility=0.9)  # a 4th field: another layout
    extra.landmark.add(x=0.4, y=0.5, z=0.6)
    assert np.array_equal(points_of(extra), _by_attributes(extra))
    partial = landmark_pb2.NormalizedLandmarkList()
    partial.landmark.add(x=0.1, y=0.2)  # z unset reads 0
    assert np.array_equal(points_of(partial), np.array([[0.1, 0.2, 0.0]], np.float32))
    assert points_of(landmark_pb2.NormalizedLandmarkList()).shape == (0, 3)
