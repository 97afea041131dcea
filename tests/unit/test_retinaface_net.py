"""Our retina-face 0.0.17 detector (torch network + pure pipeline, no TensorFlow) against the package
itself: tests/data/parity/models/retinaface_reference.json holds RetinaFace.detect_faces's faces on
the parity clips' first frames with the STAND-IN retinaface.h5 (tests/reference_tools/
retinaface_reference.py, run in the TensorFlow venv). The test regenerates the same stand-in file
(its sha256 is checked against the one the reference used) and runs our detector on the same frames.
"""
import json
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from theval_mesh.backends import stand_in
from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.headpose.retinaface_net import RetinaFaceDetector
from theval_mesh.backends.stand_in.detectors import RETINAFACE_H5, write_retinaface
from theval_mesh.pure import retinaface as rf

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = json.loads((ROOT / "tests/data/parity/models/retinaface_reference.json").read_text())


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    path = write_retinaface(tmp_path_factory.mktemp("rf"), 0)
    assert sha256_file(path) == REFERENCE["weights_sha256"], "the stand-in file changed: rerun the reference"
    return RetinaFaceDetector(path)


def frames(clip: str, n: int):
    cap = cv2.VideoCapture(str(ROOT / f"tests/data/parity/clips/{clip}.mp4"))
    for _ in range(n):
        ok, frame = cap.read()
        assert ok
        yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)  # as head_motion_dynamics.py:137
    cap.release()


@pytest.mark.slow
def test_the_layer_table_is_the_files_and_the_stand_in_is_written_with_the_marker(tmp_path):
    import h5py

    marker = stand_in.write(tmp_path, 0, models=(), headpose=True)
    assert marker["files"][RETINAFACE_H5]["sha256"] == REFERENCE["weights_sha256"]
    with h5py.File(tmp_path / RETINAFACE_H5) as f:
        assert f.attrs["backend"] == "tensorflow" and f.attrs["keras_version"] == "2.17.0"
        assert list(f.attrs["layer_names"]) == [n for n, _, _ in rf.layers()]
        conv0 = f["conv0"]
        assert list(conv0.attrs["weight_names"]) == ["conv0/kernel:0"]
        assert conv0["conv0/kernel:0"].shape == (7, 7, 3, 64)


def test_pure_rules():
    assert rf.resize_scale(512, 512) == 2.0  # shorter side to 1024
    assert rf.resize_scale(1080, 1920) == 1024 / 1080  # 1820 px wide: under the 1980 cap
    assert rf.resize_scale(500, 2000) == 1980 / 2000  # the cap wins
    a = rf.anchors_plane(2, 3, 32, rf.ANCHORS[32])
    assert a.shape == (2, 3, 2, 4) and a[1, 2, 0].tolist() == [-248 + 64, -248 + 32, 263 + 64, 263 + 32]
    img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    assert rf.network_input(img)[0, 0, 0].tolist() == [2.0, 1.0, 0.0]  # channels reversed
    dets = np.array([[0, 0, 9, 9, 0.95], [1, 1, 10, 10, 0.97], [20, 20, 29, 29, 0.91]], np.float32)
    assert rf.nms(dets) == [1, 2]  # IoU(0, 1) = 81 / 119 >= 0.4


@pytest.mark.slow
def test_a_frame_without_response_gives_no_face_as_the_package_does(detector):
    black = np.zeros((512, 512, 3), np.uint8)  # every feature 0: p(face) = sigmoid(-2) everywhere
    assert REFERENCE["black_frame"] == {}
    assert detector.detect(black) == {}


@pytest.mark.slow
def test_faces_match_the_tensorflow_package_on_the_parity_clips(detector):
    """The first half of the package's frames of each clip (each frame is detected on its own; at
    1024 px a frame costs seconds here)."""
    n = REFERENCE["frames_per_clip"] // 2
    box_diff = score_diff = point_diff = 0.0
    face1, times = [], []
    for clip, expected in REFERENCE["clips"].items():
        for k, (frame, want) in enumerate(zip(frames(clip, n), expected[:n], strict=True)):
            start = time.perf_counter()
            got = detector.detect(frame)
            times.append(time.perf_counter() - start)
            assert list(got) == list(want), f"{clip} frame {k}: {list(got)} vs {list(want)}"
            for key, w in want.items():
                g = got[key]
                box_diff = max(box_diff, np.abs(np.subtract(g["facial_area"], w["facial_area"])).max())
                score_diff = max(score_diff, abs(float(g["score"]) - w["score"]))
                point_diff = max(point_diff, max(np.abs(np.subtract(g["landmarks"][p], w["landmarks"][p])).max()
                                                 for p in rf.LANDMARKS))
            face1.append(tuple(got["face_1"]["facial_area"]))
    print(f"max |box| {box_diff} px, max |score| {score_diff:.2e}, max |landmark| {point_diff:.3f} px, "
          f"{np.median(times):.2f} s/frame (TensorFlow: {REFERENCE['seconds_per_frame']})")
    assert box_diff <= 1 and score_diff <= 1e-4
    assert len(set(face1)) > 4, "face_1 must move across frames (the head-motion translation)"
