"""Identity embeddings for CSIM: ArcFace's iresnet100 (insightface arcface_torch, the backbone of its
`ms1mv3_arcface_r100_fp16` model, `backbone.pth`), built here block for block under the same
state-dict names, so that file loads strictly; faces aligned to 112x112 by the five-point similarity
transform (pure/metrics/identity.py) and fed as (x / 255 - 0.5) / 0.5 in RGB, as arcface_torch's
evaluation does; 512-d embeddings, compared by cosine.

The five points come from MediaPipe FaceMesh (iris centres, nose tip, mouth corners), not from
insightface's RetinaFace/SCRFD detector (DETECTOR, named in provenance).
"""
from collections.abc import Iterable

import cv2
import numpy as np
import torch
from torch import nn

from theval_mesh.backends.classic.networks import weight_file
from theval_mesh.pure.errors import WeightsMissing
from theval_mesh.pure.metrics import identity

NAME = "arcface"
LAYERS = (3, 13, 30, 3)  # iresnet100
EMBEDDING = 512
DETECTOR = "five points from MediaPipe FaceMesh (insightface uses RetinaFace/SCRFD's)"


def _conv3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride, 1, bias=False)


class Block(nn.Module):
    """BN -> conv3x3 -> BN -> PReLU -> conv3x3 (stride) -> BN, plus the shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), _conv3(cin, cout)
        self.bn2, self.prelu = nn.BatchNorm2d(cout), nn.PReLU(cout)
        self.conv2, self.bn3 = _conv3(cout, cout, stride), nn.BatchNorm2d(cout)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x):
        out = self.bn3(self.conv2(self.prelu(self.bn2(self.conv1(self.bn1(x))))))
        return out + (self.downsample(x) if self.downsample is not None else x)


class IResNet(nn.Module):
    def __init__(self, layers=LAYERS):
        super().__init__()
        self.conv1, self.bn1, self.prelu = _conv3(3, 64), nn.BatchNorm2d(64), nn.PReLU(64)
        cin = 64
        for k, (planes, blocks) in enumerate(zip((64, 128, 256, 512), layers, strict=True), start=1):
            stages = [Block(cin, planes, 2)] + [Block(planes, planes, 1) for _ in range(blocks - 1)]
            setattr(self, f"layer{k}", nn.Sequential(*stages))
            cin = planes
        self.bn2 = nn.BatchNorm2d(512)
        self.fc = nn.Linear(512 * 7 * 7, EMBEDDING)
        self.features = nn.BatchNorm1d(EMBEDDING)

    def forward(self, x):
        x = self.prelu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.features(self.fc(self.bn2(x).flatten(1)))


def load(store=None) -> IResNet:
    """The network with backbone.pth from the store, strictly (every tensor, same shapes)."""
    path = weight_file(NAME, store)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        net = IResNet()
        net.load_state_dict(state, strict=True)
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file: torch raises many kinds
        raise WeightsMissing(f"CSIM skipped: {path} is not ArcFace's iresnet100 backbone.pth "
                             f"({type(err).__name__}: {str(err).splitlines()[0][:200]})") from None
    return net.eval()


def aligned(rgb: np.ndarray, points5: np.ndarray) -> np.ndarray:
    """The 112x112 face: norm_crop's warp (cv2 bilinear, black border)."""
    return cv2.warpAffine(rgb, identity.alignment(points5), (identity.ALIGNED, identity.ALIGNED), borderValue=0.0)


def embeddings(net: IResNet, faces: Iterable[np.ndarray], batch: int = 16) -> np.ndarray:
    """(N, 512) embeddings of aligned 112x112 RGB uint8 faces."""
    out, chunk = [], []

    def run():
        x = torch.from_numpy(np.stack(chunk)).permute(0, 3, 1, 2).float().div(255).sub(0.5).div(0.5)
        with torch.inference_mode():
            out.append(net(x).double().numpy())
        chunk.clear()

    for face in faces:
        chunk.append(np.asarray(face, np.uint8))
        if len(chunk) == batch:
            run()
    if chunk:
        run()
    return np.concatenate(out) if out else np.zeros((0, EMBEDDING))


def stand_in_state(seed: int) -> dict:
    """The stand-in backbone.pth: every key of the network's state_dict by backends/stand_in's
    rules, the embedding layer `fc` as a score head (outputs of order 1)."""
    from theval_mesh.backends.stand_in.rules import seeded_state

    return seeded_state(IResNet(), seed, last_linear=("fc",))
