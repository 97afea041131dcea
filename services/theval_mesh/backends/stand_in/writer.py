"""Write a store of stand-in files and its STAND-IN.json marker (`theval weights stand-in`)."""
import json
from importlib import import_module
from pathlib import Path

import numpy as np

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.stand_in.detectors import detector_state, write_retinaface
from theval_mesh.backends.stand_in.facexformer import FACEXFORMER, SWIN_B, facexformer_state, swin_b_state
from theval_mesh.backends.stand_in.rules import seeded_state, tensors, values_digest
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.store import MARKER, read_marker
from theval_mesh.pure.errors import UserError

GENERATOR = "theval stand-in weights v1"
# Where the reference scripts' timm ResNet-50 init is read (not in our store: CFANet-R50 is built
# without it); written only on request, for the reference runner.
TIMM_RESNET50 = "timm/resnet50.a1_in1k/model.safetensors"
# The classic metrics' networks (registry.CLASSIC_MODELS): the module of backends/classic whose
# stand_in_state(seed) gives the state of a state-dict file, or whose write_torchscript(path, seed)
# writes a TorchScript file (the registry's `torchscript`: FVD's I3D, the TorchScript FID Inception).
CLASSIC_NETWORKS = {"syncnet": "syncnet", "arcface": "arcface", "s3fd": "s3fd", "fid-inception": "fid",
                   "fid-inception-torchscript": "fid", "fvd-i3d": "i3d", "fvd-i3d-videogpt": "i3d_videogpt",
                   "fan-2d": "fan", "s3fd-fa": "s3fd_fa", "fvd-videomae": "videomae",
                   "openface": "openface"}


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
        # CFANet's constructor asks for the ImageNet Swin with pretrained=True (a download): build
        # it without, for the time of the constructor. B023: the lambda runs in this iteration only.
        real_swin = topiq_arch.create_swin
        topiq_arch.create_swin = lambda n, **kw: real_swin(n, **{**kw, "pretrained": False})  # noqa: B023
        try:  # model_name without "gfiqa": the same tensors, no facexlib helper to build
            net = topiq_arch.CFANet(**{**opts, "backbone_pretrain": False, "model_name": "stand-in"})
        finally:
            topiq_arch.create_swin = real_swin
        last = len(net.score_linear) - (1 if opts.get("num_class", 1) > 1 else 0) - 1
        yield qmodel, net, (f"score_linear.{last}",)


def write(store: Path, seed: int = 0, models=None, reference_extras: bool = False,
          headpose: bool = False, classic=()) -> dict:
    """Write the stand-in files of `models` (default: every quality model; () for none) into `store`
    and the STAND-IN.json marker; returns the marker's content. reference_extras: also the files
    only the reference's code reads: the timm ResNet-50 init of its pyiqa 0.1.13 (`TIMM_RESNET50`,
    safetensors) and, with headpose, torchvision's Swin-B init FaceXFormer's constructor reads
    (`SWIN_B`). headpose: also FaceXFormer's `model.pt` and retina-face 0.0.17's Keras weights
    (`RETINAFACE_H5`, HDF5). classic: names of the classic metrics' networks (registry.CLASSIC_MODELS)
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
        values = tensors(state)
        torch.save({wrap: values} if wrap else values, path)
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
    for name in classic:
        _write_classic(store, name, seed, save, written)
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


def _write_classic(store: Path, name: str, seed: int, save, written: dict) -> None:
    from theval_mesh.backends.weights.registry import CLASSIC_MODELS

    if name not in CLASSIC_NETWORKS:
        raise UserError(f"no stand-in for {name!r}; the classic networks: {', '.join(CLASSIC_NETWORKS)}")
    module_name = CLASSIC_NETWORKS[name]
    module = import_module(f"theval_mesh.backends.classic.{module_name}")
    file_name = CLASSIC_MODELS[name].main.name
    if not CLASSIC_MODELS[name].torchscript:
        save(file_name, module.stand_in_state(seed), getattr(module, "CHECKPOINT_KEY", None))
        return
    path = store / file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    state = module.write_torchscript(path, seed)
    written[file_name] = {"values_sha256": values_digest(state), "sha256": sha256_file(path)}
