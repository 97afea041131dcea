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
talking head lands on the face and on anything else lands on the centre.

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
from pathlib import Path

import numpy as np

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.quality import weights_store as ws
from theval_mesh.backends.quality.weights_store import MARKER, read_marker
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
                value = np.zeros(shape, np.int64)
            elif pname == "running_mean" or (pname == "bias" and kind.startswith(NORMS)):
                value = np.zeros(shape, np.float32)
            elif pname == "running_var":
                value = np.ones(shape, np.float32)
            elif pname == "weight" and kind.startswith(NORMS):
                closer = any(mod_name.endswith(c) for c in RESIDUAL_CLOSERS)
                value = np.full(shape, 0.2 if closer else 1.0, np.float32)
            elif pname == "bias":
                value = np.zeros(shape, np.float32)
            elif pname == "weight" and isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear,
                                                        torch.nn.Conv1d)):
                gain = 1.0 if mod_name in last_linear else 2.0
                value = _normal(seed, name, shape, (gain / _fan_in(shape)) ** 0.5)
            else:  # bare parameters: embeddings, tokens, relative position tables
                value = _normal(seed, name, shape, 0.02)
            out[name] = value
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


# ---------------------------------------------------------------------------- writers
def _pyiqa_nets():
    """(file name, weight key, network, last linear layers) of every pyiqa checkpoint."""
    from pyiqa.archs import topiq_arch
    from pyiqa.archs.musiq_arch import MUSIQ
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    from theval_mesh.backends.quality.registry import MODELS

    for name, qmodel in MODELS.items():
        opts = {**DEFAULT_CONFIGS[name]["metric_opts"], **qmodel.create_kwargs, "pretrained": False}
        opts.pop("type")
        if name.startswith("musiq"):
            yield qmodel, MUSIQ(**opts), ("head",)
            continue
        real_swin = topiq_arch.create_swin
        topiq_arch.create_swin = lambda n, **kw: real_swin(n, **{**kw, "pretrained": False})
        try:  # model_name without "gfiqa": the same tensors, no facexlib helper to build
            net = topiq_arch.CFANet(**{**opts, "backbone_pretrain": False, "model_name": "stand-in"})
        finally:
            topiq_arch.create_swin = real_swin
        last = len(net.score_linear) - (1 if opts.get("num_class", 1) > 1 else 0) - 1
        yield qmodel, net, (f"score_linear.{last}",)


def write(store: Path, seed: int = 0, models=None, reference_extras: bool = False,
          headpose: bool = False) -> dict:
    """Write the stand-in files of `models` (default: every quality model; () none) into `store`
    and the STAND-IN.json marker; returns the marker's content. reference_extras: also the timm
    ResNet-50 init the reference's pyiqa 0.1.13 reads (`TIMM_RESNET50`, safetensors). headpose:
    also FaceXFormer's `model.pt` and its Swin-B init `swin_b-68c6b09e.pth`."""
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

    for qmodel, net, last in _pyiqa_nets():
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
        save(SWIN_B, swin_b_state(seed, state))
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
