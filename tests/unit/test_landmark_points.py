"""FaceMesh's points are read from the landmark list's wire bytes, taken from FaceMesh's graph
directly: the same float32 values as the public FaceMesh.process read by each point's
attributes, on real frames of every pass, and on lists of other layouts."""
import numpy as np
from mediapipe.framework.formats import landmark_pb2

from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.landmarks.backend import FaceTracker, points_of


def _by_attributes(landmarks) -> np.ndarray:
    return np.array([(p.x, p.y, p.z) for p in landmarks.landmark], dtype=np.float32)


def test_the_tracker_gives_what_facemesh_process_gives_on_real_frames(tmp_path):
    """FaceTracker drives FaceMesh's graph itself (_first_face): per frame, the same points as
    the public FaceMesh.process read by attributes, on a second graph of the same settings fed the
    same (resized, channel-swapped) frames, a frame without a face included; the BGR swap is
    the bytes of the reversed-channel view."""
    import cv2
    import mediapipe as mp

    from theval_mesh.backends.media.decode import MediaReader
    from theval_mesh.synth import generate_kit
    generate_kit(tmp_path, seed=2, n_clips=1, duration_s=1.5, size=192)
    video = sorted(tmp_path.rglob("*.mp4"))[0]
    frames = [f for _, f in MediaReader(video).frames()][:6]
    frames.insert(3, np.zeros_like(frames[0]))  # no face: None from both, and tracking starts again
    checked = 0
    for mesh_pass in (passes.SINGLE, passes.LIP_DYNAMICS, passes.LIP_SYNC_REFERENCE, passes.MOUTH_QUALITY):
        public = mp.solutions.face_mesh.FaceMesh(
            static_image_mode=mesh_pass.static, max_num_faces=1, refine_landmarks=mesh_pass.refine,
            min_detection_confidence=0.5, min_tracking_confidence=0.5)
        with FaceTracker(mesh_pass) as tracker, public:
            for frame in frames:
                image = cv2.resize(frame, (256, 256)) if mesh_pass.resize_256 else frame
                image = np.ascontiguousarray(image[:, :, ::-1] if mesh_pass.bgr else image)
                got, result = tracker.process(frame), public.process(image)
                if not result.multi_face_landmarks:
                    assert got is None
                    continue
                expected = _by_attributes(result.multi_face_landmarks[0])
                assert got.shape == (tracker.num_points, 3) and got.dtype == np.float32
                assert np.array_equal(got, expected)
                checked += 1
    assert checked >= 4 * 5


def test_other_layouts_fall_back_to_the_attributes():
    """points_of reads serialized lists; one whose layout is not FaceMesh's reads the attributes."""
    plain = landmark_pb2.NormalizedLandmarkList()
    for x in (0.0, -1.5, 3.25e-8):  # zeros are still written (proto2: set fields are sent)
        plain.landmark.add(x=x, y=0.5, z=-0.0)
    assert np.array_equal(points_of(plain.SerializeToString()), _by_attributes(plain))
    extra = landmark_pb2.NormalizedLandmarkList()
    extra.landmark.add(x=0.1, y=0.2, z=0.3, visibility=0.9)  # a 4th field: another layout
    extra.landmark.add(x=0.4, y=0.5, z=0.6)
    assert np.array_equal(points_of(extra.SerializeToString()), _by_attributes(extra))
    partial = landmark_pb2.NormalizedLandmarkList()
    partial.landmark.add(x=0.1, y=0.2)  # z unset reads 0
    assert np.array_equal(points_of(partial.SerializeToString()), np.array([[0.1, 0.2, 0.0]], np.float32))
    assert points_of(landmark_pb2.NormalizedLandmarkList().SerializeToString()).shape == (0, 3)
