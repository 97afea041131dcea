"""S3FD's box arithmetic as syncnet_python's detector does it (detectors/s3fd/box_utils.py and
detect_faces in detectors/s3fd/__init__.py): prior boxes, decoding, the two NMS passes and the
reading of the detections. Pure: arrays in, arrays out; the network is backends/classic/s3fd.py.

S3FD predicts, for every cell of six feature maps (strides 4..128), one square prior box of side
16..512 px (in the network's input pixels) centred on the cell, a face probability and four box
deltas. Detect keeps the priors whose probability exceeds 0.05, decodes them (SSD encoding,
variances 0.1 and 0.2), suppresses overlaps above IoU 0.3 among the 5,000 best and keeps up to 750;
detect_faces keeps those above its threshold (0.9 in run_pipeline.py), in the frame's pixels, and
runs a second NMS at IoU 0.1 over them.
"""
from itertools import product

import numpy as np

STEPS = (4, 8, 16, 32, 64, 128)           # PriorBox steps: conv3_3, conv4_3, conv5_3, fc7, conv6_2, conv7_2
MIN_SIZES = (16, 32, 64, 128, 256, 512)   # PriorBox min_sizes (input px)
VARIANCE = (0.1, 0.2)                     # Detect / PriorBox variance
CONF_FLOOR = 0.05   # Detect conf_thresh: priors below never reach NMS
NMS_IOU = 0.3       # Detect nms_thresh
NMS_TOP_K = 5000    # Detect nms_top_k: the best 5,000 enter NMS
TOP_K = 750         # Detect top_k: at most 750 detections out
FINAL_NMS_IOU = 0.1  # detect_faces: nms_(bboxes, 0.1) over the kept boxes of all scales
MEAN_RGB = (123.0, 117.0, 104.0)  # img_mean (104, 117, 123) is BGR; detect_faces subtracts it in BGR


def feature_maps(h: int, w: int) -> list[tuple[int, int]]:
    """(rows, cols) of S3FD's six source maps for an h x w input: VGG's pools (the third with
    ceil_mode, syncnet_python detectors/s3fd/nets.py:53), then two stride-2 3x3 convs of padding 1."""
    def sizes(n: int) -> list[int]:
        n = n // 2 // 2  # pool1, pool2 -> conv3_3
        out = [n]
        n = -(-n // 2)   # pool3, ceil_mode -> conv4_3
        out.append(n)
        n //= 2          # pool4 -> conv5_3
        out.append(n)
        n //= 2          # pool5 -> fc6, fc7
        out.append(n)
        for _ in range(2):  # conv6_2, conv7_2
            n = (n - 1) // 2 + 1
            out.append(n)
        return out

    return list(zip(sizes(h), sizes(w), strict=True))


def prior_boxes(h: int, w: int, maps: list[tuple[int, int]]) -> np.ndarray:
    """(N, 4) float32 priors cx, cy, w, h relative to the input, level by level, row-major within a
    level (PriorBox.forward). Computed in double and stored as float32, as PriorBox's FloatTensor.
    A cell's centre is (j + 0.5) / (w / step): past the input's edge when the input is smaller
    than the step (syncnet_python detectors/s3fd/box_utils.py:201-205)."""
    mean = []
    for k, (fh, fw) in enumerate(maps):
        f_kw, f_kh = w / STEPS[k], h / STEPS[k]
        s_kw, s_kh = MIN_SIZES[k] / w, MIN_SIZES[k] / h
        for i, j in product(range(fh), range(fw)):
            mean.append(((j + 0.5) / f_kw, (i + 0.5) / f_kh, s_kw, s_kh))
    return np.array(mean, np.float64).reshape(-1, 4).astype(np.float32)


def decode(loc: np.ndarray, priors: np.ndarray, variances=VARIANCE) -> np.ndarray:
    """(N, 4) x1, y1, x2, y2 relative to the input from the deltas `loc` (float32, as box_utils.decode)."""
    loc, priors = np.asarray(loc, np.float32), np.asarray(priors, np.float32)
    v0, v1 = np.float32(variances[0]), np.float32(variances[1])
    centre = priors[:, :2] + loc[:, :2] * v0 * priors[:, 2:]
    size = priors[:, 2:] * np.exp(loc[:, 2:] * v1)
    x1y1 = centre - size / np.float32(2)
    return np.concatenate([x1y1, size + x1y1], axis=1)


def nms_detect(boxes: np.ndarray, scores: np.ndarray, overlap: float = NMS_IOU,
               top_k: int = NMS_TOP_K) -> np.ndarray:
    """Indices kept by box_utils.nms (Detect's NMS), best first: the top_k highest scores, then
    greedily the best remaining box, dropping the others that overlap it by IoU > overlap
    (no +1 pixel). Ties in score are taken in a stable order (torch's sort does not promise one)."""
    boxes, scores = np.asarray(boxes, np.float32), np.asarray(scores, np.float32)
    if not len(boxes):
        return np.zeros(0, np.int64)
    x1, y1, x2, y2 = boxes.T
    area = (x2 - x1) * (y2 - y1)
    idx = np.argsort(scores, kind="stable")[-top_k:]
    keep = []
    while len(idx):
        i = idx[-1]
        keep.append(int(i))
        idx = idx[:-1]
        w = np.clip(np.minimum(x2[idx], x2[i]) - np.maximum(x1[idx], x1[i]), 0.0, None)
        h = np.clip(np.minimum(y2[idx], y2[i]) - np.maximum(y1[idx], y1[i]), 0.0, None)
        inter = w * h
        iou = inter / ((area[idx] - inter) + area[i])
        idx = idx[iou <= overlap]
    return np.array(keep, np.int64)


def nms_final(dets: np.ndarray, thresh: float = FINAL_NMS_IOU) -> np.ndarray:
    """Indices kept by box_utils.nms_ (py-faster-rcnn's CPU NMS) over (n, 5) x1, y1, x2, y2, score,
    best first (numpy's default argsort, as theirs)."""
    dets = np.asarray(dets, np.float64).reshape(-1, 5)
    x1, y1, x2, y2, scores = dets.T
    areas = (x2 - x1) * (y2 - y1)
    order = scores.argsort()[::-1]
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(int(i))
        w = np.maximum(0.0, np.minimum(x2[i], x2[order[1:]]) - np.maximum(x1[i], x1[order[1:]]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[order[1:]]) - np.maximum(y1[i], y1[order[1:]]))
        inter = w * h
        ovr = inter / (areas[i] + areas[order[1:]] - inter)
        order = order[np.where(ovr <= thresh)[0] + 1]
    return np.array(keep, np.int64)


def detect(loc: np.ndarray, face: np.ndarray, priors: np.ndarray) -> np.ndarray:
    """Detect.forward for one image and the face class: (k, 5) score, x1, y1, x2, y2 (relative to
    the input), best first, k <= TOP_K. loc: (N, 4) deltas; face: (N,) softmax face probabilities."""
    face = np.asarray(face, np.float32)
    mask = face > CONF_FLOOR
    boxes = decode(loc, priors)[mask]
    scores = face[mask]
    keep = nms_detect(boxes, scores)[:TOP_K]
    return np.concatenate([scores[keep, None], boxes[keep]], axis=1).reshape(-1, 5)


def frame_boxes(detections: list[np.ndarray], w: int, h: int, conf_th: float) -> np.ndarray:
    """detect_faces' reading of Detect's output, one array per scale: the rows above conf_th (they are
    best first; it stops at the first that is not), times (w, h, w, h) in float32 (its torch.Tensor
    scale), then nms_ at IoU 0.1 over all scales' boxes. (n, 5) x1, y1, x2, y2, score in float64."""
    scale = np.array([w, h, w, h], np.float32)
    rows = []
    for det in detections:
        for row in np.asarray(det, np.float32):
            if not row[0] > conf_th:
                break
            rows.append(np.concatenate([row[1:] * scale, row[:1]]).astype(np.float64))
    bboxes = np.array(rows, np.float64).reshape(-1, 5)
    return bboxes[nms_final(bboxes)]


# ---------------------------------------------------------------- face-alignment's detect (AKD)
# face-alignment 3750f83 (detection/sfd/detect.py:19-56, bbox.py:44-64) reads the same six maps its
# own way: priors in the input's pixels, centred at stride/2 + cell * stride with side 4 * stride
# (stride 2**(level+2) whatever the map's real stride: its fc6 map is wider), every cell above
# 0.05 decoded, one NMS at 0.3 with +1-pixel areas over all of them, in float32.
def fa_priors(maps: list[tuple[int, int]]) -> np.ndarray:
    """(N, 4) float32 cx, cy, w, h in input pixels, level by level, row-major within a level."""
    rows = []
    for level, (fh, fw) in enumerate(maps):
        stride = 2 ** (level + 2)
        for i, j in product(range(fh), range(fw)):
            rows.append((stride / 2 + j * stride, stride / 2 + i * stride, stride * 4, stride * 4))
    return np.array(rows, np.float32).reshape(-1, 4)


def fa_detect(loc, face, maps) -> np.ndarray:
    """(k, 5) float32 x1, y1, x2, y2, score of every cell whose face probability exceeds 0.05, in
    the network's order; one row of zeros when none does (as theirs)."""
    face = np.asarray(face, np.float32)
    mask = face > CONF_FLOOR
    if not mask.any():
        return np.zeros((1, 5))
    boxes = decode(np.asarray(loc, np.float32)[mask], fa_priors(maps)[mask])
    return np.concatenate([boxes, face[mask, None]], axis=1)


def fa_nms(dets: np.ndarray, thresh: float) -> np.ndarray:
    """bbox.nms: indices kept, best first (numpy's default argsort, as theirs), areas and overlaps
    with +1 pixel, in the detections' dtype."""
    x1, y1, x2, y2, scores = (dets[:, k] for k in range(5))
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort()[::-1]
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(int(i))
        w = np.maximum(0.0, np.minimum(x2[i], x2[order[1:]]) - np.maximum(x1[i], x1[order[1:]]) + 1)
        h = np.maximum(0.0, np.minimum(y2[i], y2[order[1:]]) - np.maximum(y1[i], y1[order[1:]]) + 1)
        ovr = w * h / (areas[i] + areas[order[1:]] - w * h)
        order = order[np.where(ovr <= thresh)[0] + 1]
    return np.array(keep, np.int64)
