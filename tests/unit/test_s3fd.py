"""S3FD's box arithmetic (pure.metrics.s3fd_boxes) on known answers, and the designed stand-in
detector (backends.classic.s3fd) on a real talking-head frame. syncnet_python's own S3FD on the
same stand-in weights: tests/integration/test_syncnet_parity.py."""
import cv2
import numpy as np
import pytest

from tests.support.parity_set import clip
from theval_mesh.pure.metrics import s3fd_boxes as sb


def test_six_maps_and_one_prior_per_cell_for_run_pipelines_input():
    maps = sb.feature_maps(128, 128)  # a 512x512 frame at scale 0.25
    assert maps == [(32, 32), (16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]
    priors = sb.prior_boxes(128, 128, maps)
    assert priors.shape == (sum(h * w for h, w in maps), 4) and priors.dtype == np.float32
    # the last level: one 512-px prior at the centre, four times the input's side
    assert priors[-1].tolist() == [0.5, 0.5, 4.0, 4.0]
    assert priors[0].tolist() == [0.5 / 32, 0.5 / 32, 16 / 128, 16 / 128]
    assert sb.feature_maps(76, 76)[1] == (10, 10)  # pool3 rounds 19 up (ceil_mode)


def test_decoding_a_known_delta():
    priors = np.array([[0.5, 0.5, 0.2, 0.4]], np.float32)
    loc = np.array([[1.0, -1.0, 0.0, np.log(2) / 0.2]], np.float32)
    # centre moves by delta * 0.1 * size; the height doubles
    x1, y1, x2, y2 = sb.decode(loc, priors)[0]
    assert (x1, x2) == pytest.approx((0.52 - 0.1, 0.52 + 0.1), abs=1e-6)
    assert (y1, y2) == pytest.approx((0.46 - 0.4, 0.46 + 0.4), abs=1e-6)


def test_both_nms_keep_the_best_of_overlapping_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 9]], np.float32)
    scores = np.array([0.9, 0.95, 0.5, 0.8], np.float32)
    assert sb.nms_detect(boxes, scores, overlap=0.3).tolist() == [1, 2]
    dets = np.concatenate([boxes, scores[:, None]], axis=1)
    assert sb.nms_final(dets, 0.1).tolist() == [1, 2]
    assert sb.nms_final(dets, 0.9).tolist() == [1, 0, 3, 2]  # nothing overlaps that much


def test_frame_boxes_stop_at_the_first_detection_under_the_threshold():
    det = np.array([[0.99, 0.1, 0.1, 0.5, 0.5], [0.5, 0.6, 0.6, 0.9, 0.9], [0.95, 0.6, 0.6, 0.9, 0.9]], np.float32)
    out = sb.frame_boxes([det], w=200, h=100, conf_th=0.9)
    assert out.shape == (1, 5) and out[0, :4].tolist() == pytest.approx([20, 10, 100, 50])


@pytest.fixture(scope="module")
def stand_in_detector(tmp_path_factory):
    from theval_mesh.backends import stand_in
    from theval_mesh.backends.classic import s3fd
    store = tmp_path_factory.mktemp("s3fd")
    stand_in.write(store, 0, models=(), classic=["s3fd"])
    return s3fd.S3FD(store)


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_the_stand_in_finds_one_centred_face_box_on_a_talking_head(stand_in_detector):
    cap = cv2.VideoCapture(str(clip("tom_it_gt")))
    boxes = []
    for _ in range(3):
        ok, bgr = cap.read()
        assert ok
        boxes.append(stand_in_detector.detect_faces(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))
    cap.release()
    for b in boxes:
        assert b.shape == (1, 5) and b[0, 4] > 0.9
        x1, y1, x2, y2 = b[0, :4]
        assert 200 < x2 - x1 < 260 and abs((x1 + x2) / 2 - 256) < 20 and abs((y1 + y2) / 2 - 256) < 30
    moved = np.abs(boxes[0][0, :4] - boxes[2][0, :4]).max()
    assert 0 < moved < 5  # content-dependent, a few pixels
    assert "stand-in:0" in stand_in_detector.describe() and "conf 0.9, scale 0.25" in stand_in_detector.describe()


def test_a_file_that_is_not_s3fd_is_refused(tmp_path):
    import torch

    from theval_mesh.backends.classic import s3fd
    from theval_mesh.pure.errors import WeightsMissing
    torch.save({"vgg.0.weight": torch.zeros(1)}, tmp_path / "sfd_face.pth")
    with pytest.raises(WeightsMissing, match="not S3FD's sfd_face.pth"):
        s3fd.S3FD(tmp_path)
