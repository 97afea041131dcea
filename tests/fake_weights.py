"""FAKE quality weights for tests: the published weights cannot be fetched here, so each file
holds a randomly initialised state dict of the REAL architecture (pyiqa's CFANet / MUSIQ, timm
Swin, facexlib RetinaFace and ParseNet), saved under the published file name. The face
detector's output heads are set so that every anchor fires with fixed 5-point landmarks (a
detector that always 'finds' a face); every other tensor is random. Scores from these weights
mean nothing; the loading and serving code that reads them is the real one."""
from pathlib import Path

import pytest
from netguard import block_network

from theval_mesh.backends.quality.registry import MODELS


def write_fake_store(store: Path, models=None) -> Path:
    """The files of `models` (default: every model) in `store`, without touching the network."""
    import torch
    from facexlib.detection.retinaface import RetinaFace
    from facexlib.parsing.parsenet import ParseNet
    from pyiqa.archs import topiq_arch
    from pyiqa.archs.musiq_arch import MUSIQ
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    store.mkdir(parents=True, exist_ok=True)
    attempts = []
    with pytest.MonkeyPatch.context() as mp:
        block_network(mp, attempts)
        real_swin = topiq_arch.create_swin
        mp.setattr(topiq_arch, "create_swin",  # random Swin instead of its ImageNet download
                   lambda name, **kw: real_swin(name, **{**kw, "pretrained": False}))
        torch.manual_seed(0)
        for name, qmodel in MODELS.items():
            if models is not None and name not in models:
                continue
            # the network pyiqa builds: its table's options, overridden by the registry's kwargs
            # (topiq_nr-face: pyiqa 0.1.13's options, the GFIQA model)
            opts = {**DEFAULT_CONFIGS[name]["metric_opts"], **qmodel.create_kwargs,
                    "pretrained": False}
            opts.pop("type")
            files = {f.where: store / f.name for f in qmodel.files}
            if name.startswith("musiq"):
                torch.save(MUSIQ(**opts).state_dict(), files["main"])
                continue
            # model_name without "gfiqa": same tensors, no facexlib helper (and no download)
            net = topiq_arch.CFANet(**{**opts, "backbone_pretrain": False, "model_name": "fake"})
            torch.save({"params": net.state_dict()}, files["main"])
            if "torch_hub" in files:
                torch.save(net.semantic_model.state_dict(), files["torch_hub"])
            if "facexlib" in files:
                _fake_face_helpers(store, RetinaFace, ParseNet, torch)
    assert not attempts, "building the fake weights touched the network"
    return store


def _fake_face_helpers(store: Path, RetinaFace, ParseNet, torch):
    det = RetinaFace(network_name="resnet50", half=False, device="cpu").state_dict()
    landmarks = torch.tensor([-2, -1.5, 2, -1.5, 0, 0.5, -1.5, 2, 1.5, 2.0])  # eyes, nose, mouth
    for level in range(3):
        for head, bias in (("ClassHead", torch.tensor([-10.0, 10.0] * 2)),
                           ("BboxHead", torch.zeros(8)), ("LandmarkHead", landmarks.repeat(2))):
            det[f"{head}.{level}.conv1x1.weight"].zero_()
            det[f"{head}.{level}.conv1x1.bias"].copy_(bias)
    torch.save(det, store / "detection_Resnet50_Final.pth")
    torch.save(ParseNet(in_size=512, out_size=512, parsing_ch=19).state_dict(),
               store / "parsing_parsenet.pth")
