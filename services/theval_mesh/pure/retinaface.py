"""retina-face 0.0.17 (serengil, TensorFlow): its network's layer table and its `detect_faces`
pipeline around the network, as pure numpy functions. The reference THEval head-motion script
(Naturalness/head_motion_dynamics.py) finds the face with `RetinaFace.detect_faces(rgb_frame)` and
takes `faces['face_1']['facial_area']`; these functions reproduce that call's arithmetic exactly
(same dtypes, same order of operations), so that only the network (torch here, Keras there)
differs. The network is backends/headpose/retinaface_net.py; the image resize (cv2) is done there.

Citations are retina-face 0.0.17 files: RetinaFace.py, commons/preprocess.py (pre),
commons/postprocess.py (post), model/retinaface_model.py (model).
"""
import numpy as np

EPS = 1.9999999494757503e-05  # every BatchNormalization (model:101 and all others), float32 2e-5
THRESHOLD = 0.9  # detect_faces(threshold=0.9), RetinaFace.py:63
NMS_THRESHOLD = 0.4  # RetinaFace.py:100
SCALES = (1024, 1980)  # target shorter side, cap on the longer side: pre:134
STRIDES = (32, 16, 8)  # RetinaFace.py:103, the order of the network's outputs (model:1497-1507)
ANCHORS = {  # RetinaFace.py:105-113, (x1, y1, x2, y2) around cell (0, 0), 2 per cell
    32: np.array([[-248.0, -248.0, 263.0, 263.0], [-120.0, -120.0, 135.0, 135.0]], np.float32),
    16: np.array([[-56.0, -56.0, 71.0, 71.0], [-24.0, -24.0, 39.0, 39.0]], np.float32),
    8: np.array([[-8.0, -8.0, 23.0, 23.0], [0.0, 0.0, 15.0, 15.0]], np.float32),
}
NUM_ANCHORS = 2  # RetinaFace.py:115
LANDMARKS = ("right_eye", "left_eye", "nose", "mouth_right", "mouth_left")  # RetinaFace.py:207-211

# ------------------------------------------------------------------------------ layer table
UNITS = (3, 4, 6, 3)  # pre-activation ResNet-50 (model:124-972), stage s unit u: stage{s}_unit{u}
MID = (64, 128, 256, 512)


def backbone_layers():
    """(name, kind, shape) of the backbone's weighted layers in the Keras model's order; conv
    shape (kh, kw, in, out) as Keras stores it, bn shape (channels,)."""
    yield "bn_data", "bn", (3,)  # model:101, on the raw pixels
    yield "conv0", "conv", (7, 7, 3, 64)  # model:107, no bias
    yield "bn0", "bn", (64,)
    cin = 64
    for s, (units, mid) in enumerate(zip(UNITS, MID), start=1):
        for u in range(1, units + 1):
            p = f"stage{s}_unit{u}_"
            yield p + "bn1", "bn", (cin,)
            yield p + "conv1", "conv", (1, 1, cin, mid)
            yield p + "bn2", "bn", (mid,)
            yield p + "conv2", "conv", (3, 3, mid, mid)
            yield p + "bn3", "bn", (mid,)
            yield p + "conv3", "conv", (1, 1, mid, 4 * mid)
            if u == 1:
                yield p + "sc", "conv", (1, 1, cin, 4 * mid)
            cin = 4 * mid
    yield "bn1", "bn", (2048,)  # model:974


def neck_layers():
    """FPN and SSH context modules and heads (model:978-1490), Keras model order (by graph depth,
    as tf_keras lists them: the order `save_weights` writes and `load_weights` expects)."""
    fpn = (("ssh_c3_lateral", 1, 2048), ("ssh_c2_lateral", 1, 512), ("ssh_c2_aggr", 3, 256),
           ("ssh_m1_red_conv", 1, 256), ("ssh_c1_aggr", 3, 256))
    for name, k, cin in fpn:
        yield name, "conv_b", (k, k, cin, 256)
        yield name + "_bn", "bn", (256,)
    m = ("ssh_m3", "ssh_m2", "ssh_m1")
    for stage, cin, cout in (("det_context_conv1", 256, 128), ("det_context_conv3_1", 128, 128)):
        for x in m:
            yield f"{x}_{stage}", "conv_b", (3, 3, cin, cout)
        for x in m:
            yield f"{x}_{stage}_bn", "bn", (cout,)
    for x in m:
        yield f"{x}_det_conv1", "conv_b", (3, 3, 256, 256)
        yield f"{x}_det_context_conv2", "conv_b", (3, 3, 128, 128)
        yield f"{x}_det_context_conv3_2", "conv_b", (3, 3, 128, 128)
    for x in m:
        yield f"{x}_det_conv1_bn", "bn", (256,)
        yield f"{x}_det_context_conv2_bn", "bn", (128,)
        yield f"{x}_det_context_conv3_2_bn", "bn", (128,)
    for s in STRIDES:
        yield f"face_rpn_cls_score_stride{s}", "conv_b", (1, 1, 512, 4)
    for s in STRIDES:
        yield f"face_rpn_bbox_pred_stride{s}", "conv_b", (1, 1, 512, 8)
        yield f"face_rpn_landmark_pred_stride{s}", "conv_b", (1, 1, 512, 20)


def layers():
    """Every weighted layer (name, kind, shape): kind conv (no bias), conv_b (bias), bn."""
    return list(backbone_layers()) + list(neck_layers())


# Keras weight names per kind, in the order `layer.weights` lists them (the h5 `weight_names`)
WEIGHTS = {"conv": ("kernel",), "conv_b": ("kernel", "bias"),
           "bn": ("gamma", "beta", "moving_mean", "moving_variance")}


# ------------------------------------------------------------------------------ preprocessing
def resize_scale(height: int, width: int, allow_upscaling: bool = True) -> float:
    """pre:99-113: shorter side to 1024, unless the longer side would then round above 1980."""
    size_min, size_max = (height, width) if width > height else (width, height)  # pre:103-106
    scale = SCALES[0] / float(size_min)  # pre:108
    if not allow_upscaling:
        scale = min(1.0, scale)  # pre:109-110
    if np.round(scale * size_max) > SCALES[1]:  # pre:112
        scale = SCALES[1] / float(size_max)
    return scale  # the resize itself (cv2.INTER_LINEAR, only if scale != 1.0: pre:115-116)


def network_input(resized: np.ndarray) -> np.ndarray:
    """pre:137-144: float32, channels REVERSED (the loop reads channel 2 - i; the package assumes
    a BGR array, so the RGB frame THEval passes reaches the network as BGR), no mean, std 1,
    scale 1. (1, H, W, 3) float32, channel-last like the Keras input."""
    img = resized.astype(np.float32)
    return np.ascontiguousarray(img[None, :, :, ::-1])


# ------------------------------------------------------------------------------ decoding
def anchors_plane(height: int, width: int, stride: int, base: np.ndarray) -> np.ndarray:
    """post:221-232: (height, width, A, 4), cell (y, x) shifts its base anchors by stride*(x, y)."""
    xs = np.arange(width)[None, :, None] * stride
    ys = np.arange(height)[:, None, None] * stride
    shift = np.stack(np.broadcast_arrays(xs, ys, xs, ys), axis=-1)  # (H, W, 1, 4), int
    return shift + base[None, None].astype(np.float32)  # float32 like post:229 (int + float32)


def _centres(anchors: np.ndarray):
    """post:154-157 (and 193-197): float64 widths, heights (the +1 convention) and centres."""
    boxes = anchors.astype(float)
    widths = boxes[:, 2] - boxes[:, 0] + 1.0
    heights = boxes[:, 3] - boxes[:, 1] + 1.0
    return widths, heights, boxes[:, 0] + 0.5 * (widths - 1.0), boxes[:, 1] + 0.5 * (heights - 1.0)


def decode_boxes(anchors: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """post:146-183 (bbox_stds all 1, RetinaFace.py:142-148): float64 (n, 4)."""
    if anchors.shape[0] == 0:
        return np.zeros((0, deltas.shape[1]))
    w, h, cx, cy = _centres(anchors)
    pcx = deltas[:, 0] * w + cx  # float32 delta x float64 -> float64
    pcy = deltas[:, 1] * h + cy
    pw = np.exp(deltas[:, 2]) * w  # exp in float32 (post:167), then float64
    ph = np.exp(deltas[:, 3]) * h
    return np.stack([pcx - 0.5 * (pw - 1.0), pcy - 0.5 * (ph - 1.0),
                     pcx + 0.5 * (pw - 1.0), pcy + 0.5 * (ph - 1.0)], axis=1)


def decode_landmarks(anchors: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """post:186-202: (n, 5, 2) in the deltas' dtype (float32: the result is a copy of them)."""
    if anchors.shape[0] == 0:
        return np.zeros((0, deltas.shape[1]))
    w, h, cx, cy = _centres(anchors)
    out = deltas.copy()
    out[:, :, 0] = deltas[:, :, 0] * w[:, None] + cx[:, None]
    out[:, :, 1] = deltas[:, :, 1] * h[:, None] + cy[:, None]
    return out


def clip_boxes(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """post:205-218: into [0, W-1] x [0, H-1] of the RESIZED image, in place."""
    boxes[:, 0::2] = np.maximum(np.minimum(boxes[:, 0::2], width - 1), 0)
    boxes[:, 1::2] = np.maximum(np.minimum(boxes[:, 1::2], height - 1), 0)
    return boxes


def nms(dets: np.ndarray, threshold: float = NMS_THRESHOLD) -> list:
    """post:235-279, greedy: highest score first (argsort()[::-1] of the float32 scores), drop
    every later box whose IoU (the +1 pixel convention) is >= threshold. Vectorised per kept box;
    the same float32 arithmetic as the package's scalar loop."""
    x1, y1, x2, y2, scores = (dets[:, i] for i in range(5))
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort()[::-1]
    alive = np.ones(len(order), bool)
    keep = []
    for pos in range(len(order)):
        if not alive[pos]:
            continue
        i = order[pos]
        keep.append(int(i))
        rest = order[pos + 1:]
        w = np.maximum(np.float32(0.0), np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + 1)
        h = np.maximum(np.float32(0.0), np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + 1)
        inter = w * h
        alive[pos + 1:] &= ~(inter / (areas[i] + areas[rest] - inter) >= threshold)
    return keep


def detect(outputs, im_height: int, im_width: int, im_scale: float,
           threshold: float = THRESHOLD) -> dict:
    """RetinaFace.py:119-213 on the network's nine outputs (channel-last numpy float32, the order
    of model:1497-1507: per stride 32, 16, 8: class probabilities (1, H, W, 4: background of
    anchors 0, 1 then face of anchors 0, 1), box deltas (1, H, W, 8), landmark deltas (1, H, W, 20)).
    im_height/width: the resized image's; returns {'face_1': {score, facial_area, landmarks}, ...},
    face_1 the highest score; {} when nothing reaches the threshold (RetinaFace.py:177-178)."""
    proposals_all, scores_all, landmarks_all = [], [], []
    for k, stride in enumerate(STRIDES):
        probs, box_d, lmk_d = outputs[3 * k: 3 * k + 3]
        scores = probs[:, :, :, NUM_ANCHORS:].reshape(-1, 1)  # face channels: RetinaFace.py:130
        height, width = box_d.shape[1], box_d.shape[2]
        anchors = anchors_plane(height, width, stride, ANCHORS[stride]).reshape(-1, 4)
        box_d = box_d.reshape(-1, box_d.shape[3] // NUM_ANCHORS)  # (cells x anchors, 4)
        proposals = clip_boxes(decode_boxes(anchors, box_d), im_height, im_width)  # :149-151
        # RetinaFace.py:153: a decay for stride 4, which this network does not have
        order = np.where(scores.ravel() >= threshold)[0]  # :157, float32 scores vs 0.9
        proposals = proposals[order]
        proposals[:, 0:4] /= im_scale  # :161, back to the original frame
        proposals_all.append(proposals)
        scores_all.append(scores[order])
        lmk_d = lmk_d.reshape(-1, 5, lmk_d.shape[3] // NUM_ANCHORS // 5)
        landmarks = decode_landmarks(anchors, lmk_d)[order]  # :168-169
        landmarks[:, :, 0:2] /= im_scale  # :171, float32
        landmarks_all.append(landmarks)
    proposals = np.vstack(proposals_all)
    if proposals.shape[0] == 0:
        return {}
    scores = np.vstack(scores_all)
    order = scores.ravel().argsort()[::-1]  # :182, highest first
    proposals, scores = proposals[order], scores[order]
    landmarks = np.vstack(landmarks_all)[order].astype(np.float32, copy=False)
    pre_det = np.hstack((proposals[:, 0:4], scores)).astype(np.float32, copy=False)  # :189
    keep = nms(pre_det)  # :193, on float32 boxes and scores
    out = {}
    for idx, i in enumerate(keep):  # :199-211, in the order NMS kept them
        out[f"face_{idx + 1}"] = {
            "score": pre_det[i, 4],  # a float32 scalar (:202)
            "facial_area": [int(v) for v in pre_det[i, 0:4].astype(int)],  # truncation, :204
            "landmarks": {name: [float(x) for x in landmarks[i][j]]
                          for j, name in enumerate(LANDMARKS)},
        }
    return out
