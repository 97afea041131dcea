"""Our I3D (Inception-v1 inflated to 3D, Carreira & Zisserman 2017, the Kinetics-400 RGB network the
FVD paper uses) to build the STAND-IN `i3d_torchscript.pt`.

The published file (StyleGAN-V's, registry.CLASSIC_MODELS['fvd-i3d']) is a TorchScript archive of
someone else's code: the weights cannot be downloaded here, so a stand-in of ours takes its place,
with the same call: `detector(x, rescale=..., resize=..., return_features=...)` on a float or uint8
tensor (B, 3, T, H, W):
  rescale          x / 255 * 2 - 1 (pixels in [0, 255] to [-1, 1]; the published module's
                   transform, as its author states in universome/fvd-comparison issue #4);
  resize           trilinear resize to (T, 224, 224), align_corners=False (our reading of the
                   published module: it cannot be inspected here, see fvd.py);
  return_features  the 400 logits before the softmax, averaged over the remaining time steps (what
                   FVD takes); else their softmax.
Architecture (the standard one): a 7x7x7 stride-2 stem, 1x3x3 max pools, 1x1x1 and 3x3x3 convs,
nine inflated Inception modules (3b-3c, 4b-4f, 5b-5c), 3D max pools with TF 'SAME' padding, a
2x7x7 average pool and a 1x1x1 conv to 400 logits. Every conv but the last: no bias, BatchNorm
(eps 1e-3), ReLU. The stand-in values follow backends/stand_in's rules (`seeded_state`).
"""
from pathlib import Path

import numpy as np
import torch
from torch import nn

CLASSES = 400
SIZE = 224

# Inception module widths: 1x1, 3x3 reduce, 3x3, 3x3 (TF "5x5") reduce, its 3x3, pool proj
MIXED = {
    "Mixed_3b": (192, (64, 96, 128, 16, 32, 32)),
    "Mixed_3c": (256, (128, 128, 192, 32, 96, 64)),
    "Mixed_4b": (480, (192, 96, 208, 16, 48, 64)),
    "Mixed_4c": (512, (160, 112, 224, 24, 64, 64)),
    "Mixed_4d": (512, (128, 128, 256, 24, 64, 64)),
    "Mixed_4e": (512, (112, 144, 288, 32, 64, 64)),
    "Mixed_4f": (528, (256, 160, 320, 32, 128, 128)),
    "Mixed_5b": (832, (256, 160, 320, 32, 128, 128)),
    "Mixed_5c": (832, (384, 192, 384, 48, 128, 128)),
}


def same_pad(size: int, k: int, s: int) -> tuple[int, int]:
    total = max(k - s, 0) if size % s == 0 else max(k - size % s, 0)
    return total // 2, total - total // 2


def pad3d(x: torch.Tensor, k: list[int], s: list[int]) -> torch.Tensor:
    t0, t1 = same_pad(x.shape[2], k[0], s[0])
    h0, h1 = same_pad(x.shape[3], k[1], s[1])
    w0, w1 = same_pad(x.shape[4], k[2], s[2])
    return torch.constant_pad_nd(x, [w0, w1, h0, h1, t0, t1], 0.0)


class Unit(nn.Module):
    """Conv3d with TF 'SAME' padding, then BatchNorm and ReLU (or neither: the logits)."""

    def __init__(self, cin: int, cout: int, k=(1, 1, 1), s=(1, 1, 1), norm: bool = True, eps: float = 1e-3):
        super().__init__()
        self.k, self.s, self.norm = list(k), list(s), norm
        self.conv = nn.Conv3d(cin, cout, k, s, bias=not norm)
        self.bn = nn.BatchNorm3d(cout, eps=eps) if norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(pad3d(x, self.k, self.s))
        return torch.relu(self.bn(x)) if self.norm else x


class MaxPoolSame(nn.Module):
    def __init__(self, k, s):
        super().__init__()
        self.k, self.s = list(k), list(s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # zero padding: the inputs are ReLU outputs (>= 0), so it equals TF's -inf padding
        return torch.max_pool3d(pad3d(x, self.k, self.s), self.k, self.s)


class Mixed(nn.Module):
    def __init__(self, cin: int, w, eps: float = 1e-3):
        super().__init__()
        self.b0 = Unit(cin, w[0], eps=eps)
        self.b1a, self.b1b = Unit(cin, w[1], eps=eps), Unit(w[1], w[2], (3, 3, 3), eps=eps)
        self.b2a, self.b2b = Unit(cin, w[3], eps=eps), Unit(w[3], w[4], (3, 3, 3), eps=eps)
        self.b3pool, self.b3b = MaxPoolSame((3, 3, 3), (1, 1, 1)), Unit(cin, w[5], eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b0(x), self.b1b(self.b1a(x)), self.b2b(self.b2a(x)),
                          self.b3b(self.b3pool(x))], 1)


class I3D(nn.Module):
    """eps: the BatchNorm's (1e-3 as TensorFlow's I3D; the copy of piergiaj/pytorch-i3d's InceptionI3d
    in common_metrics_on_video_quality has 1e-5). time_pool: the final average pool's time extent
    (2 as the original; DisCo's copy pools 1x7x7, so that any length has a time step left)."""

    def __init__(self, eps: float = 1e-3, time_pool: int = 2):
        super().__init__()
        self.time_pool = time_pool
        self.Conv3d_1a_7x7 = Unit(3, 64, (7, 7, 7), (2, 2, 2), eps=eps)
        self.MaxPool3d_2a_3x3 = MaxPoolSame((1, 3, 3), (1, 2, 2))
        self.Conv3d_2b_1x1 = Unit(64, 64, eps=eps)
        self.Conv3d_2c_3x3 = Unit(64, 192, (3, 3, 3), eps=eps)
        self.MaxPool3d_3a_3x3 = MaxPoolSame((1, 3, 3), (1, 2, 2))
        self.Mixed_3b, self.Mixed_3c = (Mixed(*MIXED[n], eps=eps) for n in ("Mixed_3b", "Mixed_3c"))
        self.MaxPool3d_4a_3x3 = MaxPoolSame((3, 3, 3), (2, 2, 2))
        self.Mixed_4b, self.Mixed_4c, self.Mixed_4d, self.Mixed_4e, self.Mixed_4f = (
            Mixed(*MIXED[n], eps=eps) for n in ("Mixed_4b", "Mixed_4c", "Mixed_4d", "Mixed_4e", "Mixed_4f"))
        self.MaxPool3d_5a_2x2 = MaxPoolSame((2, 2, 2), (2, 2, 2))
        self.Mixed_5b, self.Mixed_5c = (Mixed(*MIXED[n], eps=eps) for n in ("Mixed_5b", "Mixed_5c"))
        self.logits = Unit(1024, CLASSES, norm=False)

    def forward(self, x: torch.Tensor, rescale: bool = False, resize: bool = False,
                return_features: bool = False) -> torch.Tensor:
        x = x.to(torch.float32)
        if rescale:
            x = x / 255.0 * 2.0 - 1.0
        if resize:
            # F.interpolate(size=(T, 224, 224), mode="trilinear", align_corners=False), called as the
            # aten op: scripted F.interpolate drags in ops older torch versions cannot load
            x = torch._C._nn.upsample_trilinear3d(x, [x.shape[2], 224, 224], False)
        x = self.MaxPool3d_2a_3x3(self.Conv3d_1a_7x7(x))
        x = self.MaxPool3d_3a_3x3(self.Conv3d_2c_3x3(self.Conv3d_2b_1x1(x)))
        x = self.MaxPool3d_4a_3x3(self.Mixed_3c(self.Mixed_3b(x)))
        x = self.Mixed_4f(self.Mixed_4e(self.Mixed_4d(self.Mixed_4c(self.Mixed_4b(x)))))
        x = self.Mixed_5c(self.Mixed_5b(self.MaxPool3d_5a_2x2(x)))
        x = torch._C._nn.avg_pool3d(x, [self.time_pool, 7, 7], [1, 1, 1])  # VALID, as the original
        logits = self.logits(x).mean(dim=[2, 3, 4])  # (B, 400): the spatial 1x1 and time averaged
        return logits if return_features else torch.softmax(logits, 1)




def build_network():
    """Our I3D, uninitialised, in eval mode."""
    return I3D().eval()


def stand_in_state(seed: int) -> dict:
    """{name: numpy array} of the stand-in I3D, by backends/stand_in's rules; the logits conv is
    the score head (std 1/sqrt(fan_in)), so the 400 features are O(1)."""
    from theval_mesh.backends.stand_in.rules import seeded_state

    net = build_network()
    return seeded_state(net, seed, last_linear=("logits.conv",))


def write_torchscript(path: Path, seed: int) -> dict:
    """Script the seeded I3D and save it as a TorchScript archive at `path` (the published file's
    format: `torch.jit.load(path)` gives the detector). Returns the state's values (for the
    STAND-IN.json digest)."""
    state = stand_in_state(seed)
    net = build_network()
    net.load_state_dict({k: torch.from_numpy(np.array(v, order="C")) for k, v in state.items()}, strict=True)
    scripted = torch.jit.script(net)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    scripted.save(str(path))
    return state
