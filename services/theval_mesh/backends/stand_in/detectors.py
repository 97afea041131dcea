"""The designed face detectors: facexlib's RetinaFace-R50 (quality's face crops) and retina-face's
Keras network (the reference's head-pose crops), both CENTRE/CONTENT priors (the package docstring),
and the HDF5 file the Keras one is read from."""
from pathlib import Path

import numpy as np

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.stand_in.rules import fan_in, normal, rule_value, seeded_state, values_digest

# facexlib's stride-32 face head, anchor 0 (256 px), calibrated once on the parity clips' first
# frames: face logit = FACEXLIB_FACE_BIAS + (positive weights, std FACEXLIB_CONTENT) . (the SSH
# features, non-negative after their ReLU). On a 512 px talking head 26-157 of the 256 anchors pass
# facexlib's 0.97 with scores spread over 0.97-0.999, 3-18 boxes survive NMS, and the one nearest the
# image centre (only_center_face) holds the face. No near-tie of scores decides which box NMS keeps,
# so every CPU keeps the same (a constant logit once saturated them all into two float32 values and
# the box picked followed the CPU's kernels). A flat frame responds alike at every interior anchor:
# a black one still finds a box among exact ties; a small image (96 px) finds none.
FACEXLIB_FACE_BIAS = -1.5
FACEXLIB_CONTENT = 0.04


def detector_state(seed: int) -> dict:
    """facexlib RetinaFace-R50 with designed heads: strides 8 and 16, and anchor 1 (512 px) of
    stride 32, never fire (face logit 12 below background); anchor 0 of stride 32 scores its content
    (FACEXLIB_FACE_BIAS, FACEXLIB_CONTENT); boxes are the anchors' own and five landmarks sit around
    the anchor centre, each plus a small content-dependent shift."""
    from facexlib.detection.retinaface import RetinaFace

    net = RetinaFace(network_name="resnet50", half=False, device="cpu")
    state = seeded_state(net, seed)
    # five points (eyes, nose, mouth corners) in units of 0.1 x anchor size around its centre:
    # eye distance 0.36 x anchor (92 px for a 256 px anchor), a face filling the anchor
    points = np.array([-1.8, -1.2, 1.8, -1.2, 0.0, 0.6, -1.4, 2.2, 1.4, 2.2], np.float32)
    never = np.array([6.0, -6.0] * 2, np.float32)  # (background, face) logits of both anchors
    for level in range(3):
        for head, bias in (("ClassHead", never),
                           ("BboxHead", np.zeros(8, np.float32)),
                           ("LandmarkHead", np.tile(points, 2))):
            w = f"{head}.{level}.conv1x1.weight"
            # a small content-dependent part: boxes and points move a little with the image
            state[w] = normal(seed, w, state[w].shape, 0.02 / fan_in(state[w].shape) ** 0.5)
            state[f"{head}.{level}.conv1x1.bias"] = bias.copy()
    w, b = "ClassHead.2.conv1x1.weight", "ClassHead.2.conv1x1.bias"
    state[w] = np.zeros_like(state[w])  # channels: background, face of anchor 0, then of anchor 1
    state[w][1] = np.abs(normal(seed, w + "/face", state[w].shape[1:], FACEXLIB_CONTENT))
    state[b] = np.array([0.0, FACEXLIB_FACE_BIAS, 6.0, -6.0], np.float32)
    return state


RETINAFACE_H5 = "retinaface.h5"  # retina-face 0.0.17 reads $DEEPFACE_HOME/.deepface/weights/<this>
# The stride-32 face head, calibrated once on the parity clips' first frames (the network is
# positively homogeneous: no biases before the heads, so its features scale with the pixels):
# RETINAFACE_CONTENT is the std of the (positive) face-logit weights, RETINAFACE_BOX/POINTS those of
# the box and landmark deltas' weights. See retinaface_keras_state.
RETINAFACE_FACE_BIAS = -2.0  # p(face) 0.12 with no response: a black frame gives no face
RETINAFACE_CONTENT = 5.5e-5
RETINAFACE_BOX = 4e-6
RETINAFACE_POINTS = 4e-6


def retinaface_keras_state(seed: int) -> dict:
    """{layer: {weight: array}} for retina-face's Keras network, shapes as Keras stores them
    (kernels (kh, kw, in, out)), by the rules (`rule_value`; a kernel's fan_in is kh*kw*in), with
    the residual branches closed by conv3 ('he_closer': this ResNet is pre-activation, no norm
    after conv3) and designed CONTENT-PRIOR heads (a random-number network cannot find faces):
      - strides 16 and 8: face logits -12 below background, zero weights: they never fire;
      - stride 32, anchor 1 (256 px): likewise never fires; anchor 0 (512 px): face logit =
        logit(0.8) + a content part with POSITIVE weights on the (non-negative, post-ReLU)
        features: a frame with no response (a black frame: every feature 0) scores 0.8 < 0.9 and
        gives no face; on a picture the anchors whose receptive field responds most pass 0.9,
        and face_1 is the strongest of them: it moves with the picture, frame to frame;
      - boxes: the anchor's own (bias 0) plus a small content-dependent shift; landmarks: five
        points around the anchor centre (eyes, nose, mouth corners) plus a small shift.
    On the parity clips (1024 px after the upscale) 60-300 of the 2,048 stride-32 anchors pass 0.9
    and 2-10 faces survive NMS, so the package's pure-Python NMS stays fast (random heads pass
    ~half of the 43,008 anchors). face_1 is where the features respond most, which is NOT always
    the face (a centre prior needs the position, which this fully convolutional network only sees
    near the zero-padded borders)."""
    from theval_mesh.pure import retinaface as rf

    out = {}
    for layer, kind, shape in rf.layers():
        weights = {}
        for w in rf.WEIGHTS[kind]:
            name = f"{layer}/{w}"
            if w == "kernel":
                torch_shape = (shape[3], shape[2], shape[0], shape[1])  # the fan_in convention
                role = "he_closer" if layer.endswith("_conv3") else "he"
                weights[w] = rule_value(seed, name, role, torch_shape).transpose(2, 3, 1, 0).copy()
            else:
                role = {"bias": "zeros", "beta": "zeros", "moving_mean": "zeros",
                        "gamma": "ones", "moving_variance": "ones"}[w]
                weights[w] = rule_value(seed, name, role, shape[-1:])
        out[layer] = weights
    points = np.array([-1.8, -1.2, 1.8, -1.2, 0.0, 0.6, -1.4, 2.2, 1.4, 2.2], np.float32) * 0.1
    for stride in rf.STRIDES:
        cls, box, lmk = (out[f"face_rpn_{h}_stride{stride}"] for h in ("cls_score", "bbox_pred",
                                                                       "landmark_pred"))
        cls["kernel"][:] = 0.0
        cls["bias"][:] = np.array([0.0, 0.0, -12.0, -12.0], np.float32)  # bg a0, a1, face a0, a1
        for head, std in ((box, RETINAFACE_BOX), (lmk, RETINAFACE_POINTS)):
            if stride == 32:  # a small content-dependent part (the He values, rescaled)
                head["kernel"] *= np.float32(std / (2.0 / 512) ** 0.5)
            else:
                head["kernel"][:] = 0.0
        lmk["bias"][:] = np.tile(points, 2)  # in anchor widths around its centre (post:200-201)
    cls = out["face_rpn_cls_score_stride32"]
    name = "face_rpn_cls_score_stride32/kernel"
    cls["kernel"][0, 0, :, 2] = np.abs(normal(seed, name + "/face", (512,), RETINAFACE_CONTENT))
    cls["bias"][2] = np.float32(RETINAFACE_FACE_BIAS)
    return out


def write_keras_h5(path: Path, state: dict, keras_version: str = "2.17.0") -> None:
    """The HDF5 layout tf_keras `Model.save_weights(path.h5)` writes (legacy h5 format): root attrs
    backend, keras_version, layer_names; a group per layer with attr weight_names
    ('<layer>/<weight>:0') and its datasets under those names. Only weighted layers are listed
    (load_weights matches weighted layers in order and ignores the others)."""
    import h5py

    from theval_mesh.pure import retinaface as rf

    text = h5py.string_dtype()
    with h5py.File(path, "w", track_order=False) as f:
        f.attrs["backend"] = "tensorflow"
        f.attrs["keras_version"] = keras_version
        names = [layer for layer, _, _ in rf.layers()]
        f.attrs["layer_names"] = np.array(names, dtype=text)
        for layer in names:
            group = f.create_group(layer)
            wnames = [f"{layer}/{w}:0" for w in state[layer]]
            group.attrs["weight_names"] = np.array(wnames, dtype=text)
            for wname, value in zip(wnames, state[layer].values()):
                group.create_dataset(wname, data=np.asarray(value, np.float32))


def keras_values_digest(state: dict) -> str:
    return values_digest({f"{layer}/{w}": v for layer, ws_ in state.items() for w, v in ws_.items()})


def write_retinaface(store: Path, seed: int, written: dict | None = None) -> Path:
    """The stand-in retinaface.h5 into `store`; records it in `written` (the marker's files)."""
    state = retinaface_keras_state(seed)
    path = Path(store) / RETINAFACE_H5
    path.parent.mkdir(parents=True, exist_ok=True)
    write_keras_h5(path, state)
    if written is not None:
        written[RETINAFACE_H5] = {"values_sha256": keras_values_digest(state),
                                  "sha256": sha256_file(path)}
    return path
