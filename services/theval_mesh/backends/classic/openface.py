"""OpenFace nn4.small2 as thnkim/OpenFacePytorch (d002218, loadOpenFace.py) ports it: the identity
network of First Order Motion Model's AED (AliaksandrSiarohin/pose-evaluation 1bc4cae,
`extract.py --type face_id`, which pins that commit as a submodule), with its state dict
`openface.pth` (registry.CLASSIC_MODELS['openface']).

Our module keeps the port's tensor names (layer1 ... layer25, an Inception's branches as
`seq_list.N.<step>`) and what its layers compute, quirks included:
- its cross-map LRN (SpatialCrossMapLRN_temp.py, a copy of torch.legacy's) sums the squares of a
  running window with the Lua code's indices taken over unchanged into 0-based Python, so the
  window's lower edge lags: channel 0's square stays in every channel's sum (`cross_map_lrn`);
- an Inception's branches of smaller maps are zero-padded, centred, to the largest (its forward);
- the output is the 128-d layer25 divided by sqrt(sum of squares + 1e-6) (and the 736-d before it).
"""
from collections import OrderedDict

import numpy as np

from theval_mesh.backends.classic import networks

NAME = "openface"
SIDE = 96  # extract_face_id resizes every frame to 96 x 96
EMBEDDING = 128
LRN = (5, 1e-4, 0.75, 1.0)  # CrossMapLRN(5, 0.0001, 0.75), k=1
# layer -> (input, kernels, strides, outputs, reduces, pool): the port's Inception arguments
INCEPTIONS = {
    "layer14": (192, (3, 5), (1, 1), (128, 32), (96, 16, 32, 64), ("max", 3, 2)),
    "layer15": (256, (3, 5), (1, 1), (128, 64), (96, 32, 64, 64), ("lp", 3, 3)),
    "layer16": (320, (3, 5), (2, 2), (256, 64), (128, 32, None, None), ("max", 3, 2)),
    "layer17": (640, (3, 5), (1, 1), (192, 64), (96, 32, 128, 256), ("lp", 3, 3)),
    "layer18": (640, (3, 5), (2, 2), (256, 128), (160, 64, None, None), ("max", 3, 2)),
    "layer19": (1024, (3,), (1,), (384,), (96, 96, 256), ("lp", 3, 3)),
    "layer21": (736, (3,), (1,), (384,), (96, 96, 256), ("max", 3, 2)),
}


def cross_map_lrn(x, size: int = LRN[0], alpha: float = LRN[1], beta: float = LRN[2], k: float = LRN[3]):
    """SpatialCrossMapLRN_temp.updateOutput on a (B, C, H, W) tensor, step by step in its order:
    the first scale sums the squares of channels 0 .. prePad - 1; each next one adds channel
    c + prePad - 1 (while there is one) and, for c > prePad, takes channel c - prePad away."""
    import torch

    square = x.pow(2)
    channels, pre_pad = x.shape[1], int((size - 1) / 2 + 1)
    scale = torch.empty_like(x)
    first = scale.select(1, 0)
    first.zero_()
    for c in range(min(pre_pad, channels)):
        first.add_(square.select(1, c))
    for c in range(1, channels):
        current = scale.select(1, c)
        current.copy_(scale.select(1, c - 1))
        if c < channels - pre_pad + 1:
            current.add_(square.select(1, c + pre_pad - 1))
        if c > pre_pad:
            current.add_(square.select(1, c - pre_pad), alpha=-1)
    scale.mul_(alpha / size).add_(k)
    return scale.pow(-beta).mul_(x)


def _modules():
    import torch
    from torch import nn
    from torch.nn import functional as F

    class CrossMapLRN(nn.Module):
        def forward(self, x):
            return cross_map_lrn(x)

    def conv_bn_relu(steps: list, cin: int, cout: int, kernel, stride, pad, first: int) -> list:
        names = [f"{first}_conv", f"{first + 1}_bn", f"{first + 2}_relu"]
        return steps + [(names[0], nn.Conv2d(cin, cout, kernel, stride=stride, padding=pad)),
                        (names[1], nn.BatchNorm2d(cout)), (names[2], nn.ReLU())]

    class Inception(nn.Module):
        def __init__(self, cin, kernels, strides, outputs, reduces, pool):
            super().__init__()
            branches = []
            for i, kernel in enumerate(kernels):  # 1x1 reduce, then the n x n conv
                steps = conv_bn_relu([], cin, reduces[i], (1, 1), 1, (0, 0), 1)
                branches.append(conv_bn_relu(steps, reduces[i], outputs[i], kernel, strides[i], kernel // 2, 4))
            kind, size, stride = pool
            steps = [("1_pool", nn.MaxPool2d((size, size), stride=(stride, stride)) if kind == "max"
                      else nn.LPPool2d(2, (size, size), stride=(stride, stride)))]
            i = len(kernels)
            if reduces[i] is not None:
                steps = conv_bn_relu(steps, cin, reduces[i], (1, 1), 1, (0, 0), 2)
            branches.append(steps)
            if i + 1 < len(reduces) and reduces[i + 1] is not None:
                branches.append(conv_bn_relu([], cin, reduces[i + 1], (1, 1), 1, (0, 0), 1))
            self.seq_list = nn.ModuleList(nn.Sequential(OrderedDict(b)) for b in branches)

        def forward(self, x):
            ys = [seq(x) for seq in self.seq_list]
            h, w = max(y.shape[2] for y in ys), max(y.shape[3] for y in ys)
            padded = []
            for y in ys:
                left, top = (w - y.shape[3]) // 2, (h - y.shape[2]) // 2
                padded.append(F.pad(y, (left, w - y.shape[3] - left, top, h - y.shape[2] - top)))
            return torch.cat(padded, 1)

    class OpenFace(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = nn.Conv2d(3, 64, (7, 7), stride=(2, 2), padding=(3, 3))
            self.layer2 = nn.BatchNorm2d(64)
            self.layer4 = nn.MaxPool2d((3, 3), stride=(2, 2), padding=(1, 1))
            self.layer6 = nn.Conv2d(64, 64, (1, 1))
            self.layer7 = nn.BatchNorm2d(64)
            self.layer9 = nn.Conv2d(64, 192, (3, 3), padding=(1, 1))
            self.layer10 = nn.BatchNorm2d(192)
            self.layer13 = nn.MaxPool2d((3, 3), stride=(2, 2), padding=(1, 1))
            for name, args in INCEPTIONS.items():
                setattr(self, name, Inception(*args))
            self.layer22 = nn.AvgPool2d((3, 3), stride=(1, 1))
            self.layer25 = nn.Linear(736, EMBEDDING)
            self.lrn = CrossMapLRN()

        def forward(self, x):
            """(B, 3, 96, 96) -> ((B, 128) unit-length embedding, (B, 736) before layer25)."""
            x = self.lrn(self.layer4(F.relu(self.layer2(self.layer1(x)))))
            x = F.relu(self.layer7(self.layer6(x)))
            x = self.layer13(self.lrn(F.relu(self.layer10(self.layer9(x)))))
            for name in INCEPTIONS:
                x = getattr(self, name)(x)
            x_736 = self.layer22(x).view((-1, 736))
            x = self.layer25(x_736)
            norm = torch.sqrt(torch.sum(x ** 2, 1) + 1e-6)
            return torch.div(x, norm.view(-1, 1).expand_as(x)), x_736

    return OpenFace


def empty():
    """The network with its default initial values (for its names and shapes)."""
    return _modules()()


def load(store=None):
    """The network with the store's openface.pth (strict), in eval mode (WeightsMissing when the
    file is absent or not OpenFacePytorch's)."""
    from theval_mesh.pure.errors import WeightsMissing

    net = empty()
    try:
        net.load_state_dict(networks.load(NAME, store), strict=True)
    except RuntimeError as err:
        raise WeightsMissing(f"AED: {NAME} is not OpenFacePytorch's openface.pth ({str(err).splitlines()[0]})") from None
    return net.eval()


def frame_input(rgb: np.ndarray) -> np.ndarray:
    """extract_face_id's input from one RGB frame (extract.py:82-87): the whole frame (no face
    detection), channels reversed to BGR, scikit-image's resize to 96 x 96 with the defaults of
    the 0.14.0 that pose-evaluation pins (bilinear, mode 'constant', no anti-aliasing; later
    releases blur before down-sampling), in [0, 1], as (3, 96, 96) float32."""
    from skimage.transform import resize

    small = resize(rgb[..., ::-1], (SIDE, SIDE), order=1, mode="constant", anti_aliasing=False)
    return np.transpose(small, (2, 0, 1)).astype(np.float32)


def embeddings(net, frames) -> np.ndarray:
    """(N, 128) float32: each RGB frame's unit-length embedding, one frame per call as
    extract_face_id runs them (a batch would round differently)."""
    import torch

    out = []
    with torch.no_grad():
        for rgb in frames:
            out.append(net(torch.from_numpy(frame_input(rgb))[None])[0][0].numpy())
    return np.array(out, np.float32).reshape(-1, EMBEDDING)


def provenance(store=None) -> str:
    """What computed AED: the code followed and the network's file (with its checksum)."""
    return (f"AliaksandrSiarohin/pose-evaluation (1bc4cae) extract.py face_id and cmp.py with thnkim/OpenFacePytorch "
            f"(d002218): OpenFace nn4.small2 {networks.describe(NAME, store)}; FOMM's AED is identity, not "
            "expression: the whole frame (BGR, 96 x 96, scikit-image 0.14's resize), the squared distance of "
            "the 128-d embeddings, a model's AED over all its frames")


def stand_in_state(seed: int) -> dict:
    """The stand-in openface.pth by the stand-in rules, under the port's names; without BatchNorm's
    num_batches_tracked, which the port's file (saved by torch 0.3) does not have."""
    from theval_mesh.backends.stand_in.rules import seeded_state

    state = seeded_state(empty(), seed, last_linear=("layer25",))
    return {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
