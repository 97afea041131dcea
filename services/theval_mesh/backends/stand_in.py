"""Deterministic STAND-IN weights: every weight file of the quality models (and, on request, of the
FaceXFormer head-pose network), in the format and under
the key names the real file has, filled from a seeded numpy generator. Scores computed with them
mean nothing; they exist so that our pipeline and the reference scripts can be run on the SAME
network and compared (preprocessing, cropping, batching, detection, colour order, resizing and
averaging do not depend on the weights' values).

Every tensor's values come from `numpy.random.default_rng([seed, crc32(name)])`, drawn in float32,
so they are identical whatever the torch version (only torch's container format may differ).
Scales follow the module a tensor belongs to, so that no network saturates:
  - convolutions and linear layers: normal, std sqrt(2 / fan_in) (He), biases 0;
  - the last linear layer of a score head: std 1 / sqrt(fan_in), so logits stay O(1);
  - normalisation layers: weight 1, bias 0, running mean 0, running variance 1; the norm closing
    a residual branch (ResNet `bn3`, `downsample.1`) weight 0.2, so 16 stacked blocks do not grow
    the features by orders of magnitude;
  - bare parameters (position embeddings, class tokens, relative position tables): std 0.02;
  - buffers the constructor computes (index tables, attention masks, mean/std constants): kept.
The face detector (facexlib RetinaFace-R50) cannot learn faces from random numbers. Its heads are
designed: only the coarsest level (stride 32, anchors of 256 and 512 px) scores above the 0.97
threshold, boxes and five landmarks are the anchor's own plus a small content-dependent shift, so
facexlib keeps the box nearest the image centre: a CENTRE-PRIOR detector, which on a centred
talking head lands on the face and on anything else lands on the centre. syncnet_python's S3FD
(`sfd_face.pth`) is designed the same way (backends/legacy/s3fd.py stand_in_state).

FaceXFormer (`model.pt`, head pose; backends/headpose/facexformer_net.py) follows the same rules
with two exceptions (facexformer_state):
  - its random-Fourier position encoding `pe_layer.positional_encoding_gaussian_matrix` is a
    buffer the constructor draws with torch.randn (the original's facexformer.py:143-146): a
    constant that is not reproducible, so it is drawn here, std 1 as the constructor's;
  - the pose head's last linear layer has std POSE_STD / sqrt(fan_in): the pose token leaves a
    LayerNorm, so the head's input is O(1) per unit whatever the image; with it pitch, yaw and
    roll have a spread of some tens of degrees across images and move by degrees from frame to
    frame of a talking head, and nothing saturates (the outputs are linear).
Its Swin-B ImageNet init `swin_b-68c6b09e.pth` (torchvision's state_dict) is written too: the
reference's constructor reads it (from the torch hub cache) and model.pt then overwrites every
value, so its values are the ones in model.pt under `backbone.0.` / `backbone.1.`.

The store that holds them gets `STAND-IN.json` (seed, generator version, sha256 of each file):
`theval weights verify` reports those files as stand-ins, never as the published weights, and
provenance names them `stand-in:<seed>`.
"""
import hashlib
import json
import zlib
from importlib import import_module
from pathlib import Path

import numpy as np

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.store import MARKER, read_marker
from theval_mesh.pure.errors import UserError

GENERATOR = "theval stand-in weights v1"
# Where the reference scripts' timm ResNet-50 init is read (not in our store: CFANet-R50 is built
# without it); written only on request, for the reference runner.
TIMM_RESNET50 = "timm/resnet50.a1_in1k/model.safetensors"


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _normal(seed: int, name: str, shape, std: float) -> np.ndarray:
    return _rng(seed, name).standard_normal(shape, dtype=np.float32) * np.float32(std)


def _fan_in(shape) -> int:
    return int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])


NORMS = ("BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "FrozenBatchNorm")
RESIDUAL_CLOSERS = ("bn3", "downsample.1")


# The rules, by the role a tensor plays (the module docstring): every generator maps its tensors
# to these roles, so the torch checkpoints and the Keras HDF5 file follow one set of rules.
def rule_value(seed: int, name: str, role: str, shape) -> np.ndarray:
    """role: 'zeros', 'ones', 'closer' (the weight of a norm closing a residual branch, 0.2),
    'he' (std sqrt(2 / fan_in)), 'he_closer' (a conv closing a residual branch with no norm
    after it, as pre-activation ResNets have: He x 0.2), 'head' (std 1 / sqrt(fan_in)), 'bare'
    (std 0.02). fan_in is the product of all dimensions but the FIRST (torch's (out, in, kh, kw))."""
    shape = tuple(shape)
    if role == "zeros":
        return np.zeros(shape, np.float32)
    if role == "ones":
        return np.ones(shape, np.float32)
    if role == "closer":
        return np.full(shape, 0.2, np.float32)
    if role in ("he", "he_closer", "head"):
        std = ((1.0 if role == "head" else 2.0) / _fan_in(shape)) ** 0.5
        return _normal(seed, name, shape, std * (0.2 if role == "he_closer" else 1.0))
    if role == "bare":
        return _normal(seed, name, shape, 0.02)
    raise ValueError(role)


def seeded_state(net, seed: int, last_linear: tuple[str, ...] = ()) -> dict:
    """{name: numpy array} for every entry of net.state_dict(), by the rules above.
    last_linear: module names whose weight gets std 1/sqrt(fan_in) (score heads)."""
    import torch

    out = {}
    for mod_name, mod in net.named_modules():
        kind = type(mod).__name__
        for pname, tensor in list(mod._parameters.items()) + list(mod._buffers.items()):
            if tensor is None:
                continue
            name = f"{mod_name}.{pname}" if mod_name else pname
            shape = tuple(tensor.shape)
            if pname in mod._buffers and pname not in ("running_mean", "running_var",
                                                       "num_batches_tracked"):
                if name in net.state_dict():  # persistent: a constant the constructor computed
                    out[name] = tensor.detach().cpu().numpy().copy()
                continue
            if pname == "num_batches_tracked":
                out[name] = np.zeros(shape, np.int64)
                continue
            if pname == "running_mean" or pname == "bias":
                role = "zeros"
            elif pname == "running_var":
                role = "ones"
            elif pname == "weight" and kind.startswith(NORMS):
                role = "closer" if any(mod_name.endswith(c) for c in RESIDUAL_CLOSERS) else "ones"
            elif pname == "weight" and isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear,
                                                        torch.nn.Conv1d, torch.nn.Conv3d)):
                role = "head" if mod_name in last_linear else "he"
            else:  # bare parameters: embeddings, tokens, relative position tables
                role = "bare"
            out[name] = rule_value(seed, name, role, shape)
    missing = set(net.state_dict()) - set(out)
    if missing:
        raise AssertionError(f"stand-in rules left {sorted(missing)[:3]} unfilled")
    return out


def _load(net, state: dict):
    import torch

    net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    return net


def _tensors(state: dict) -> dict:
    import torch

    # np.array, not np.ascontiguousarray: the latter turns a 0-d array (BatchNorm's
    # num_batches_tracked) into shape (1,)
    return {k: torch.from_numpy(np.array(v, order="C")) for k, v in state.items()}


def values_digest(state: dict) -> str:
    """sha256 over names, dtypes, shapes and values: equal whatever container wrote them."""
    h = hashlib.sha256()
    for k in sorted(state):
        v = np.array(state[k], order="C")
        h.update(f"{k}|{v.dtype.str}|{v.shape}".encode())
        h.update(v.tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------- face detector
def detector_state(seed: int) -> dict:
    """facexlib RetinaFace-R50 with the centre-prior heads (module docstring)."""
    from facexlib.detection.retinaface import RetinaFace

    net = RetinaFace(network_name="resnet50", half=False, device="cpu")
    state = seeded_state(net, seed)
    # five points (eyes, nose, mouth corners) in units of 0.1 x anchor size around its centre:
    # eye distance 0.36 x anchor (92 px for a 256 px anchor), a face filling the anchor
    points = np.array([-1.8, -1.2, 1.8, -1.2, 0.0, 0.6, -1.4, 2.2, 1.4, 2.2], np.float32)
    for level in range(3):
        fire = 12.0 if level == 2 else -12.0  # logit(face) - logit(background), both anchors
        for head, bias in (("ClassHead", np.array([-fire / 2, fire / 2] * 2, np.float32)),
                           ("BboxHead", np.zeros(8, np.float32)),
                           ("LandmarkHead", np.tile(points, 2))):
            w = f"{head}.{level}.conv1x1.weight"
            # a small content-dependent part: boxes and points move a little with the image
            state[w] = _normal(seed, w, state[w].shape, 0.02 / _fan_in(state[w].shape) ** 0.5)
            state[f"{head}.{level}.conv1x1.bias"] = bias
    return state


# ---------------------------------------------------------------------------- head pose
FACEXFORMER = "model.pt"  # the published file name (ckpts/model.pt), {CHECKPOINT_KEY: state}
SWIN_B = "swin_b-68c6b09e.pth"  # torchvision's swin_b IMAGENET1K_V1 file, in the torch hub cache
POSE_HEAD = "face_decoder.pose_prediction_head.layers.2"
PE_MATRIX = "pe_layer.positional_encoding_gaussian_matrix"
POSE_STD = 0.25  # radians of output per unit of (normalised) pose feature: see the docstring


def facexformer_state(seed: int) -> dict:
    """The stand-in FaceXFormer state_dict (module docstring)."""
    from theval_mesh.backends.headpose.facexformer_net import FaceXFormer

    net = FaceXFormer()
    state = seeded_state(net, seed)
    state[PE_MATRIX] = _normal(seed, PE_MATRIX, state[PE_MATRIX].shape, 1.0)
    w = f"{POSE_HEAD}.weight"
    state[w] = _normal(seed, w, state[w].shape, POSE_STD / _fan_in(state[w].shape) ** 0.5)
    return state


def swin_b_state(seed: int, facexformer: dict) -> dict:
    """torchvision swin_b's state_dict with the values model.pt gives the backbone (the classifier
    `head`, which FaceXFormer drops, by the rules)."""
    from torchvision.models import swin_b

    net = swin_b(weights=None)
    state = seeded_state(net, seed)
    children = [name for name, _ in net.named_children()]
    for key in state:
        child, rest = key.split(".", 1)
        mine = f"backbone.{children.index(child)}.{rest}"
        if mine in facexformer:
            state[key] = facexformer[mine]
    return state


# ---------------------------------------------------------------------------- retina-face (Keras)
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
    cls["kernel"][0, 0, :, 2] = np.abs(_normal(seed, name + "/face", (512,), RETINAFACE_CONTENT))
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


# ---------------------------------------------------------------------------- writers
def _pyiqa_nets():
    """(file name, weight key, network, last linear layers) of every pyiqa checkpoint."""
    from pyiqa.archs import topiq_arch
    from pyiqa.archs.musiq_arch import MUSIQ
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    from theval_mesh.backends.weights.registry import MODELS

    for name, qmodel in MODELS.items():
        opts = {**DEFAULT_CONFIGS[name]["metric_opts"], **qmodel.create_kwargs, "pretrained": False}
        opts.pop("type")
        if name.startswith("musiq"):
            yield qmodel, MUSIQ(**opts), ("head",)
            continue
        real_swin = topiq_arch.create_swin
        # B023: the lambda runs in this iteration only (create_swin is restored below)
        topiq_arch.create_swin = lambda n, **kw: real_swin(n, **{**kw, "pretrained": False})  # noqa: B023
        try:  # model_name without "gfiqa": the same tensors, no facexlib helper to build
            net = topiq_arch.CFANet(**{**opts, "backbone_pretrain": False, "model_name": "stand-in"})
        finally:
            topiq_arch.create_swin = real_swin
        last = len(net.score_linear) - (1 if opts.get("num_class", 1) > 1 else 0) - 1
        yield qmodel, net, (f"score_linear.{last}",)


def write(store: Path, seed: int = 0, models=None, reference_extras: bool = False,
          headpose: bool = False, legacy=()) -> dict:
    """Write the stand-in files of `models` (default: every quality model; () for none) into `store`
    and the STAND-IN.json marker; returns the marker's content. reference_extras: also the files
    only the reference's code reads: the timm ResNet-50 init of its pyiqa 0.1.13 (`TIMM_RESNET50`,
    safetensors) and, with headpose, torchvision's Swin-B init FaceXFormer's constructor reads
    (`SWIN_B`). headpose: also FaceXFormer's `model.pt` and retina-face 0.0.17's Keras weights
    (`RETINAFACE_H5`, HDF5). legacy: names of the legacy metrics' networks (registry.LEGACY_MODELS)
    to write too."""
    import torch
    from facexlib.parsing.parsenet import ParseNet

    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    real = [f.name for f in ws.status(store, models) if f.present and f.stand_in_seed is None]
    if real:
        raise UserError(f"{store} already holds weight files that are not stand-ins "
                        f"({', '.join(real)}); write the stand-ins to an empty directory")
    written = {}

    def save(name: str, state: dict, wrap=None):
        path = store / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = _tensors(state)
        torch.save({wrap: tensors} if wrap else tensors, path)
        written[name] = {"values_sha256": values_digest(state), "sha256": sha256_file(path)}

    for qmodel, net, last in (_pyiqa_nets() if models is None or len(models) else ()):
        if models is not None and qmodel.name not in models:
            continue
        state = seeded_state(net, seed, last)
        files = {f.where: f.name for f in qmodel.files}
        save(files["main"], state, qmodel.weight_key)
        if "torch_hub" in files:  # the Swin ImageNet init: its keys must load, values unused
            prefix = "semantic_model."
            save(files["torch_hub"], {k[len(prefix):]: v for k, v in state.items()
                                      if k.startswith(prefix)})
        if "facexlib" in files:
            save("detection_Resnet50_Final.pth", detector_state(seed))
            parse = ParseNet(in_size=512, out_size=512, parsing_ch=19)
            save("parsing_parsenet.pth", seeded_state(parse, seed))
            if reference_extras:
                _write_timm_resnet50(store, seed, written)
    if headpose:
        from theval_mesh.backends.headpose.facexformer_net import CHECKPOINT_KEY

        state = facexformer_state(seed)
        save(FACEXFORMER, state, CHECKPOINT_KEY)
        if reference_extras:
            save(SWIN_B, swin_b_state(seed, state))
        write_retinaface(store, seed, written)
    for name in legacy:
        if name in ("syncnet", "arcface", "s3fd"):
            file_name, state = legacy_state(name, seed)
            save(file_name, state)
        else:  # FID's Inception and FVD's I3D TorchScript: written by their own module
            from theval_mesh.backends.legacy import stand_ins

            file_name, entry = stand_ins.write_file(store, name, seed)
            written[file_name] = entry
    marker = {"generator": GENERATOR, "seed": seed, "files": written}
    old = read_marker(store)
    if old and old.get("seed") == seed:
        marker["files"] = {**old.get("files", {}), **written}
    (store / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n")
    return marker


def _write_timm_resnet50(store: Path, seed: int, written: dict) -> None:
    import timm
    from safetensors.numpy import save_file

    net = timm.create_model("resnet50", pretrained=False)
    state = seeded_state(net, seed)
    path = store / TIMM_RESNET50
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: np.array(v, order="C") for k, v in state.items()}, str(path))
    written[TIMM_RESNET50] = {"values_sha256": values_digest(state), "sha256": sha256_file(path)}


def legacy_state(name: str, seed: int) -> tuple[str, dict]:
    """(file name, state) of a legacy metric's network, as its real file holds it."""
    from theval_mesh.backends.weights.registry import LEGACY_MODELS

    if name == "syncnet":
        from theval_mesh.backends.legacy.syncnet import SyncNet

        # syncnet_v2.model predates BatchNorm's num_batches_tracked (torch 0.4.1): not in the file
        state = seeded_state(SyncNet(), seed, last_linear=("netfcaud.3", "netfclip.3"))
        # SyncNet reads raw 0..255 pixels and unscaled MFCCs: He-random first kernels would answer
        # the brightness and the loudness, the same in every window, and distances would differ by
        # 0.05 % between shifts. Zero-mean first kernels answer edges, motion and spectral shape,
        # as a trained front end does, so that the offset search has something to find.
        for first in ("netcnnlip.0.weight", "netcnnaud.0.weight"):
            w = state[first]
            state[first] = (w - w.mean(axis=tuple(range(1, w.ndim)), keepdims=True)).astype(np.float32)
        return LEGACY_MODELS[name].main.name, {k: v for k, v in state.items()
                                               if not k.endswith("num_batches_tracked")}
    if name in ("arcface", "s3fd"):
        module = import_module(f"theval_mesh.backends.legacy.{name}")
        return LEGACY_MODELS[name].main.name, module.stand_in_state(seed)
    raise UserError(f"no stand-in state for {name!r}: its file is written by backends/legacy/stand_ins.py")
