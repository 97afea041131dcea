"""AKD's arithmetic (pure/metrics/akd.py) and face-alignment's crop and read-out
(backends/classic/fan.py, s3fd_boxes' `fa_` functions) on known answers. Their equality with
pose-evaluation's and face-alignment's own code on stand-in weights: test_akd_parity.py."""
import numpy as np
import pytest
import torch

from theval_mesh.backends.classic import fan
from theval_mesh.pure.metrics import akd
from theval_mesh.pure.metrics import s3fd_boxes as sb


def test_a_frames_distance_is_the_mean_absolute_coordinate_difference_not_the_point_distance():
    gt = np.zeros((68, 2))
    assert akd.frame_distance(gt, gt + (3.0, 4.0)) == pytest.approx(3.5)  # Euclidean would say 5


def test_frames_without_a_face_are_left_out_and_counted_and_akd_weighs_every_frame_alike():
    p = np.zeros((68, 2))
    one = akd.keypoint_distances([p, p, None, p, p], [p + 1, None, p, p + 3])
    assert one.distances.tolist() == [1.0, 3.0]
    assert (one.no_face_generated, one.no_face_gt, one.unpaired) == (1, 1, 1)
    other = akd.keypoint_distances([p], [p + 8])
    assert akd.akd([one, other]) == pytest.approx((1 + 3 + 8) / 3)  # not the mean of 2.0 and 8.0
    assert np.isnan(akd.akd([akd.keypoint_distances([p], [None])]))


def test_the_heatmap_peak_moves_a_quarter_pixel_towards_its_higher_neighbours_and_is_truncated():
    hm = torch.zeros(68, 64, 64)
    hm[:, 20, 10] = 1.0
    hm[:, 20, 11], hm[:, 21, 10] = 0.5, 0.5  # right and lower neighbours higher than left and upper
    # scale 0.32 and centre (32, 32): the crop's map is the identity on the 64-pixel heatmap
    points = fan.points_from_heatmaps(hm, torch.tensor([32.0, 32.0]), 0.32)
    # 1-based peak (11, 21), +0.25 each, -0.5: (10.75, 20.75), truncated to integers
    assert points.shape == (68, 2) and points[0].tolist() == [10.0, 20.0]
    hm[:, 20, 9], hm[:, 19, 10] = 0.9, 0.9  # now left and upper are higher: (10.25, 20.25) -> (10, 20)
    assert fan.points_from_heatmaps(hm, torch.tensor([32.0, 32.0]), 0.32)[0].tolist() == [10.0, 20.0]
    border = torch.zeros(68, 64, 64)
    border[:, 0, 5] = 1.0  # on the border: no shift, 1-based (6, 1) - 0.5
    assert fan.points_from_heatmaps(border, torch.tensor([32.0, 32.0]), 0.32)[0].tolist() == [5.0, 0.0]


def test_the_crop_is_the_boxs_square_one_pixel_short_stretched_and_black_beyond_the_frame():
    import cv2

    image = np.arange(100 * 100 * 3, dtype=np.int64).reshape(100, 100, 3).astype(np.uint8)
    # centre (50, 50), scale 0.5: corners (1, 1) and (100, 100), 1-based; their window is the 99
    # pixels after the first corner (utils.crop: br - ul wide), stretched to the resolution
    whole = fan.crop(image, torch.tensor([50.0, 50.0]), 0.5, resolution=100)
    assert np.array_equal(whole, cv2.resize(image[1:, 1:], (100, 100), interpolation=cv2.INTER_LINEAR))
    # centred on the left edge: the window's left half is black, its right half the frame's left
    window = np.zeros((99, 99, 3), np.uint8)
    window[:, 49:] = image[1:, :50]
    left = fan.crop(image, torch.tensor([0.0, 50.0]), 0.5, resolution=100)
    assert np.array_equal(left, cv2.resize(window, (100, 100), interpolation=cv2.INTER_LINEAR))


def test_the_box_centre_is_raised_by_12_percent_of_its_height_and_the_scale_is_its_sides_over_195():
    center, scale = fan.box_center_scale(np.array([10, 20, 110, 220, 0.9], np.float32))
    assert center.tolist() == pytest.approx([60.0, 120.0 - 0.12 * 200])
    assert scale == pytest.approx(300 / 195)


def test_face_alignments_priors_assume_the_nominal_stride_and_its_nms_keeps_the_best_of_overlaps():
    priors = sb.fa_priors([(2, 2), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1)])
    assert priors[:4].tolist() == [[2, 2, 16, 16], [6, 2, 16, 16], [2, 6, 16, 16], [6, 6, 16, 16]]
    assert priors[-1].tolist() == [64, 64, 512, 512]  # conv7_2: stride 128, whatever its map's size
    dets = np.array([[0, 0, 9, 9, 0.6], [1, 1, 10, 10, 0.9], [50, 50, 60, 60, 0.7]], np.float32)
    assert sb.fa_nms(dets, 0.3).tolist() == [1, 2]
    assert sb.fa_detect(np.zeros((2, 4)), np.array([0.01, 0.02]), [(1, 2)]).tolist() == [[0.0] * 5]


def test_a_models_akd_from_each_pairs_mean_and_frames_is_the_mean_over_all_frames_on_every_resample():
    p = np.zeros((68, 2))
    pairs = [akd.keypoint_distances([p] * 3, [p + 1, p + 2, p + 3]), akd.keypoint_distances([p], [p + 8]),
             akd.keypoint_distances([p], [None])]  # no frame: weighs nothing
    value, weighted = akd.frame_weighted([x.distances.mean() if len(x.distances) else np.nan for x in pairs],
                                         [len(x.distances) for x in pairs])
    assert value == pytest.approx(akd.akd(pairs)) == pytest.approx(14 / 4)
    assert weighted(np.array([2, 0, 1])) == pytest.approx(2.0)  # the first pair twice: its frames twice
    assert weighted(np.array([0, 1, 0])) == pytest.approx(8.0) and np.isnan(weighted(np.array([0, 0, 3])))
