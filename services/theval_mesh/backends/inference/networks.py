"""Where each of the six networks is cut out of its torch code to run on another runtime.

Only the arithmetic of the network moves. What the reference does around it stays in torch and
numpy, unchanged: pyiqa's antialiased resizes, MUSIQ's zero-padded multi-scale patches, facexlib's
face alignment, prior boxes and NMS, retina-face's 1024 px upscale and float (not uint8) input in
the channel order the reference hands it. Each cut is a module whose graph is traced once
(export.py), then swapped in for the torch code it replaces; the torch modules it held are freed.

  network                     cut (input -> output)                          dynamic axes
  topiq_iaa (CFANet, Swin-B)  384x384 image -> score logits (after pyiqa's      batch
                              resize; topiq_arch.py:490-575, CFANet.forward_cross_attention)
  topiq_nr-face (CFANet, R50) aligned 512x512 face -> score (the same cut)     batch
  musiq                       multi-scale patches -> MOS (musiq_arch.py:414-457) batch, patches
  facexlib RetinaFace-R50     mean-subtracted BGR image -> loc, conf, landmarks  height, width
                              (facexlib/detection/retinaface.py RetinaFace.forward)
  retina-face R50 (head pose) upscaled frame -> nine maps (retinaface_net.py)   height, width
  FaceXFormer (head pose)     normalised 224x224 crops -> radians (facexformer_net.py)  batch
"""
import contextlib
import ctypes
import gc
from pathlib import Path

import numpy as np
import torch
from torch import nn

from theval_mesh.backends.inference import export
from theval_mesh.backends.inference.sessions import SESSIONS

# A cut's version: bump it when a cut changes, and every cached export of it is made again.
CUT = "1"


class OnRuntime:
    """Stands in for the torch code of a cut: torch tensors in, torch tensors out (on the input's
    device), the arithmetic on `session`."""

    def __init__(self, session, outputs: int):
        self.session, self.outputs = session, outputs

    def __call__(self, *tensors):
        arrays = [np.ascontiguousarray(t.detach().float().cpu().numpy()) for t in tensors]
        outs = [torch.from_numpy(o).to(tensors[0].device) for o in self.session.run(*arrays)]
        return outs[0] if self.outputs == 1 else tuple(outs)


class _Traced(nn.Module):
    """A bound function as a module, for the tracer: `owner` holds the parameters.

    skip_preprocessing: `owner.training` alone is set while it runs (not its children's, and
    after the exporter has put everything in eval mode): pyiqa's CFANet and MUSIQ then skip their
    eval-time preprocessing (topiq_arch.py:492, musiq_arch.py:411), which stays in torch, while
    every layer inside runs in eval mode."""

    def __init__(self, owner: nn.Module, fn, skip_preprocessing: bool = False):
        super().__init__()
        self.owner, self.fn, self.skip = owner, fn, skip_preprocessing
        # A new module is in training mode, and the exporter puts the module back in the mode it
        # found it in: the owner's layers (dropout) would be left training.
        self.eval()

    def forward(self, *args):
        if not self.skip:
            return self.fn(*args)
        self.owner.training = True
        try:
            return self.fn(*args)
        finally:
            self.owner.training = False


def _free(module: nn.Module) -> None:
    """Free the torch tensors a cut replaced (its own graph holds them now), before the runtime
    loads that graph: a process never holds a network twice, and its peak memory stays the
    torch path's (bench/network_speed.py --memory)."""
    module._modules.clear()
    module._parameters.clear()
    module._buffers.clear()
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # glibc: give the freed heap back now
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _session(plan, path: Path):
    return SESSIONS[plan.runtime](path, plan.device)


def _export(store, name, weights_sha, module, example, inputs, outputs, dynamic):
    return export.exported(Path(store), name, CUT, weights_sha, module, example, inputs, outputs, dynamic)


# ---------------------------------------------------------------------------------------- pyiqa
def cfanet_resize(net, x):
    """pyiqa CFANet's eval-time resize (topiq_arch.py:492-498 in 0.1.16): Swin needs 384x384,
    the others `test_img_size` (512 for topiq_nr-face). Kept in torch: antialiased."""
    import torchvision.transforms.functional as TF
    if "swin" in net.semantic_model_name:
        return TF.resize(x, [384, 384], antialias=True)
    if net.test_img_size is not None:
        return TF.resize(x, net.test_img_size, antialias=True)
    return x


@contextlib.contextmanager
def _constant_pool_sizes():
    """CFANet pools each level to the last level's size, read from tensor shapes
    (topiq_arch.py:524): constants, since its input is always 384 or 512 px square, which the
    ONNX exporter needs. While tracing, the pool is the average over each whole k x k block that
    adaptive pooling takes when the sizes divide (they do: 48, 24 -> 12; 128, 64, 32 -> 16)."""
    import torch.nn.functional as F
    pool = F.adaptive_avg_pool2d

    def blocks(x, size):
        (h, w), (oh, ow) = (int(s) for s in x.shape[2:]), (int(s) for s in size)
        if h % oh or w % ow:
            raise ValueError(f"CFANet pools {h}x{w} to {oh}x{ow}: not whole blocks")
        return F.avg_pool2d(x, (h // oh, w // ow))

    F.adaptive_avg_pool2d = blocks
    try:
        yield
    finally:
        F.adaptive_avg_pool2d = pool


@contextlib.contextmanager
def _batch_free_windows():
    """pyiqa's Swin computes the batch size as a Python int when it merges windows
    (topiq_swin.py:201, `B = int(...)`), which the tracer would keep as the example's batch. While
    tracing, the same view with the batch left to the reshape (-1)."""
    from pyiqa.archs import topiq_swin
    original = topiq_swin.window_reverse

    def window_reverse(windows, window_size: int, H: int, W: int):
        x = windows.view(-1, H // window_size, W // window_size, window_size, window_size, windows.shape[-1])
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, windows.shape[-1])

    topiq_swin.window_reverse = window_reverse
    try:
        yield
    finally:
        topiq_swin.window_reverse = original


def swap_cfanet(net, plan, store, weights_sha, name: str) -> None:
    """CFANet's forward_cross_attention after its resize, on the runtime; face alignment
    (preprocess_face) and the score's mapping stay in pyiqa's torch code."""
    size = 384 if "swin" in net.semantic_model_name else net.test_img_size
    example = (torch.rand(2, 3, size, size),)
    with _constant_pool_sizes(), _batch_free_windows():
        path = _export(store, name, weights_sha, _Traced(net, net.forward_cross_attention, True), example,
                       ["image"], ["score"], {"image": {0: "batch"}, "score": {0: "batch"}})
    _free(net)
    run = OnRuntime(_session(plan, path), 1)
    net.forward_cross_attention = lambda x, y=None: run(cfanet_resize(net, x))


def musiq_patches(net, x):
    """MUSIQ's eval-time input (musiq_arch.py:411-413 in 0.1.16): [-1, 1], then the multi-scale
    patches of the zero-padded image with their positions and mask. Kept in torch: its shape
    follows the image."""
    from pyiqa.data.multiscale_trans_util import get_multiscale_patches
    return get_multiscale_patches((x - 0.5) * 2, **net.data_preprocess_opts)


def swap_musiq(net, plan, store, weights_sha, name: str) -> None:
    """MUSIQ from its patches to the MOS on the runtime; the patches in torch."""
    example = (musiq_patches(net, torch.rand(2, 3, 96, 128)),)
    path = _export(store, name, weights_sha, _Traced(net, net.forward, True), example, ["patches"], ["mos"],
                   {"patches": {0: "batch", 1: "patches"}, "mos": {0: "batch"}})
    _free(net)
    run = OnRuntime(_session(plan, path), 1)
    net.forward = lambda x, return_mos=True, return_dist=False: run(musiq_patches(net, x))


def swap_facexlib_detector(detector, plan, store, weights_sha, name: str) -> None:
    """facexlib's RetinaFace-R50 network on the runtime (any image size); its transform, prior
    boxes, decoding and NMS stay facexlib's."""
    example = (torch.rand(1, 3, 96, 128) * 255,)
    path = _export(store, name, weights_sha, _Traced(detector, detector.forward), example, ["image"],
                   ["loc", "conf", "landmarks"],
                   {"image": {2: "height", 3: "width"}, "loc": {1: "anchors"}, "conf": {1: "anchors"},
                    "landmarks": {1: "anchors"}})
    _free(detector)
    detector.forward = OnRuntime(_session(plan, path), 3)


def swap_quality_model(metric, qmodel, plan, store, files: dict) -> None:
    """A built pyiqa metric (pyiqa_models.build) with its networks on the plan's runtime.
    files: {file name: sha256} of what was loaded."""
    net = metric.net
    sha = [files[f.name] for f in qmodel.files if f.affects_scores]
    if qmodel.name.startswith("musiq"):
        swap_musiq(net, plan, store, sha, qmodel.name)
        return
    swap_cfanet(net, plan, store, sha, qmodel.name)
    helper = getattr(net, "face_helper", None)
    if helper is not None:
        detector_sha = [files[f.name] for f in qmodel.files if f.where == "facexlib" and f.affects_scores]
        swap_facexlib_detector(helper.face_det, plan, store, detector_sha, "facexlib-retinaface")


# ------------------------------------------------------------------------------------ head pose
def retinaface_on_runtime(net, plan, store, weights_sha: str):
    """retina-face's network (retinaface_net.RetinaFaceNet) on the runtime: (1, H, W, 3) float32
    frames of any size in, its nine maps out. `net` is emptied: the runtime holds it now."""
    example = (torch.rand(1, 96, 128, 3) * 255,)
    outs = [f"out{i}" for i in range(9)]
    dynamic = {"frame": {1: "height", 2: "width"}, **{o: {1: "h", 2: "w"} for o in outs}}
    path = _export(store, "retinaface", [weights_sha], net, example, ["frame"], outs, dynamic)
    net._folded = {}
    _free(net)
    return OnRuntime(_session(plan, path), 9)


def facexformer_on_runtime(net, plan, store, weights_sha: str):
    """FaceXFormer's head-pose output on the runtime: (N, 3, 224, 224) normalised crops in.
    `net` is emptied: the runtime holds it now."""
    example = (torch.rand(2, 3, 224, 224),)
    path = _export(store, "facexformer", [weights_sha], net, example, ["crops"], ["radians"],
                   {"crops": {0: "batch"}, "radians": {0: "batch"}})
    _free(net)
    return OnRuntime(_session(plan, path), 1)
