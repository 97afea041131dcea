"""FAN, the 68-point face-landmark network of 1adrianb/face-alignment at 3750f83 (the version that
AliaksandrSiarohin/pose-evaluation pins for AKD), layer for layer under the state-dict names of its
`models.FAN`, so `2DFAN-4.pth.tar` loads strictly; and the landmark pipeline of its
`FaceAlignment.get_landmarks_from_image` (api.py:143-221): face-alignment's S3FD on the BGR frame
(backends/classic/s3fd_fa.py), a crop around each box, FAN's last heatmaps,
their peaks moved a quarter pixel towards the higher neighbour, mapped back to the frame and
truncated to integer pixels (utils.py:59-173).

FAN(4): a stem (7x7 conv of stride 2, three pre-activation ConvBlocks, an average pool) to 256
channels at 64x64, then four stacked hourglasses of depth 4, each with its heatmap head (68 maps)
fed back into the next. Only the last stack's heatmaps are read.
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from theval_mesh.backends.classic.networks import load as load_weights
from theval_mesh.pure.errors import WeightsMissing

NAME = "fan-2d"       # registry.CLASSIC_MODELS key
STACKS = 4            # NetworkSize.LARGE (api.py:35)
POINTS = 68
CROP = 256            # utils.crop's resolution
HEATMAP = 64          # FAN's output side
REFERENCE_SCALE = 195.0  # SFDDetector.reference_scale (sfd_detector.py:59-60)
CENTRE_RAISE = 0.12   # the crop centre moved up by 12 % of the box height (api.py:183)


def _conv3x3(cin: int, cout: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, 1, padding=1, bias=False)


class ConvBlock(nn.Module):
    """Pre-activation block whose three 3x3 convs (half, quarter, quarter of the output channels)
    are concatenated and added to the input (through BN, ReLU and a 1x1 conv where widths differ)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), _conv3x3(cin, cout // 2)
        self.bn2, self.conv2 = nn.BatchNorm2d(cout // 2), _conv3x3(cout // 2, cout // 4)
        self.bn3, self.conv3 = nn.BatchNorm2d(cout // 4), _conv3x3(cout // 4, cout // 4)
        self.downsample = None if cin == cout else nn.Sequential(
            nn.BatchNorm2d(cin), nn.ReLU(True), nn.Conv2d(cin, cout, 1, 1, bias=False))

    def forward(self, x):
        a = self.conv1(F.relu(self.bn1(x)))
        b = self.conv2(F.relu(self.bn2(a)))
        c = self.conv3(F.relu(self.bn3(b)))
        return torch.cat((a, b, c), 1) + (x if self.downsample is None else self.downsample(x))


class HourGlass(nn.Module):
    """Depth-4 hourglass: at each level a skip block beside a pooled branch that recurses, the
    branch upsampled (nearest) and added back. Blocks named b1_L, b2_L, b3_L and b2_plus_1."""

    def __init__(self, depth: int = 4, features: int = 256):
        super().__init__()
        self.depth = depth
        for level in range(depth, 0, -1):
            for name in ("b1", "b2", "b3") + (("b2_plus",) if level == 1 else ()):
                self.add_module(f"{name}_{level}", ConvBlock(features, features))

    def _level(self, level: int, x):
        low = self._modules[f"b2_{level}"](F.avg_pool2d(x, 2, stride=2))
        low = self._level(level - 1, low) if level > 1 else self._modules["b2_plus_1"](low)
        low = self._modules[f"b3_{level}"](low)
        return self._modules[f"b1_{level}"](x) + F.interpolate(low, scale_factor=2, mode="nearest")

    def forward(self, x):
        return self._level(self.depth, x)


class FAN(nn.Module):
    def __init__(self, stacks: int = STACKS):
        super().__init__()
        self.stacks = stacks
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, padding=3), nn.BatchNorm2d(64)
        self.conv2, self.conv3, self.conv4 = ConvBlock(64, 128), ConvBlock(128, 128), ConvBlock(128, 256)
        for i in range(stacks):
            self.add_module(f"m{i}", HourGlass())
            self.add_module(f"top_m_{i}", ConvBlock(256, 256))
            self.add_module(f"conv_last{i}", nn.Conv2d(256, 256, 1))
            self.add_module(f"bn_end{i}", nn.BatchNorm2d(256))
            self.add_module(f"l{i}", nn.Conv2d(256, POINTS, 1))
            if i < stacks - 1:
                self.add_module(f"bl{i}", nn.Conv2d(256, 256, 1))
                self.add_module(f"al{i}", nn.Conv2d(POINTS, 256, 1))

    def forward(self, x):
        """The last stack's heatmaps (N, 68, 64, 64) of crops (N, 3, 256, 256) in [0, 1]."""
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.conv4(self.conv3(F.avg_pool2d(self.conv2(x), 2, stride=2)))
        for i in range(self.stacks):
            features = self._modules[f"top_m_{i}"](self._modules[f"m{i}"](x))
            features = F.relu(self._modules[f"bn_end{i}"](self._modules[f"conv_last{i}"](features)))
            heatmaps = self._modules[f"l{i}"](features)
            if i < self.stacks - 1:
                x = x + self._modules[f"bl{i}"](features) + self._modules[f"al{i}"](heatmaps)
        return heatmaps


def load(store=None) -> FAN:
    """FAN on `2DFAN-4.pth.tar` from the weights store (WeightsMissing when absent or not FAN's)."""
    net = FAN()
    try:
        net.load_state_dict(load_weights(NAME, store), strict=True)
    except RuntimeError as err:
        raise WeightsMissing(f"AKD: {NAME} is not face-alignment's 2DFAN-4 ({str(err).splitlines()[0]})") from None
    return net.eval()


# ---------------------------------------------------------------- the crop and the read-out
def transform(point, center, scale: float, resolution: float, invert: bool = False) -> torch.Tensor:
    """utils.transform: the point through the crop's affine map (or its inverse), in float32 as
    theirs (torch.inverse of the 3x3 matrix), TRUNCATED to integers (`.int()`)."""
    h = 200.0 * scale
    t = torch.eye(3)
    t[0, 0] = t[1, 1] = resolution / h
    t[0, 2] = resolution * (-center[0] / h + 0.5)
    t[1, 2] = resolution * (-center[1] / h + 0.5)
    if invert:
        t = torch.inverse(t)
    p = torch.ones(3)
    p[0], p[1] = point[0], point[1]
    return (t @ p)[:2].int()


def crop(image: np.ndarray, center, scale: float, resolution: int = CROP) -> np.ndarray:
    """utils.crop: the square of side 200 * scale around `center` (1-based corners from
    `transform`), black where it leaves the frame, resized to resolution x resolution (cv2 bilinear)."""
    import cv2

    ul = [int(v) for v in transform([1, 1], center, scale, resolution, True)]
    br = [int(v) for v in transform([resolution, resolution], center, scale, resolution, True)]
    out = np.zeros((br[1] - ul[1], br[0] - ul[0], image.shape[2]), np.uint8)
    ht, wd = image.shape[:2]
    new_x, new_y = (max(1, -ul[0] + 1), min(br[0], wd) - ul[0]), (max(1, -ul[1] + 1), min(br[1], ht) - ul[1])
    old_x, old_y = (max(1, ul[0] + 1), min(br[0], wd)), (max(1, ul[1] + 1), min(br[1], ht))
    out[new_y[0] - 1:new_y[1], new_x[0] - 1:new_x[1]] = image[old_y[0] - 1:old_y[1], old_x[0] - 1:old_x[1], :]
    return cv2.resize(out, dsize=(resolution, resolution), interpolation=cv2.INTER_LINEAR)


def points_from_heatmaps(hm: torch.Tensor, center, scale: float) -> np.ndarray:
    """utils.get_preds_fromhm for one face's (68, 64, 64) heatmaps: each map's first maximum
    (1-based), moved 0.25 towards the higher neighbour on each axis away from the border, minus
    0.5, mapped back into the frame by `transform` (integers): (68, 2) float32 x, y."""
    n, side = hm.shape[0], hm.shape[-1]
    idx = torch.max(hm.reshape(n, side * side), 1)[1] + 1
    preds = torch.stack(((idx - 1) % side + 1, torch.div(idx - 1, side, rounding_mode="floor") + 1), 1).float()
    for j in range(n):
        px, py = int(preds[j, 0]) - 1, int(preds[j, 1]) - 1
        if 0 < px < 63 and 0 < py < 63:  # 63: their bound, the 64-pixel map's last index
            m = hm[j]
            diff = torch.tensor([float(m[py, px + 1] - m[py, px - 1]), float(m[py + 1, px] - m[py - 1, px])])
            preds[j] += diff.sign() * 0.25
    preds -= 0.5
    return torch.stack([transform(p, center, scale, side, True) for p in preds]).float().numpy()


def box_center_scale(box) -> tuple[torch.Tensor, float]:
    """api.py:180-185: the crop centre (the box's, raised by 12 % of its height) and scale."""
    x1, y1, x2, y2 = box[0], box[1], box[2], box[3]  # numpy scalars: their arithmetic, in the box's dtype
    center = torch.tensor([float(x2 - (x2 - x1) / 2.0), float(y2 - (y2 - y1) / 2.0)])
    center[1] = center[1] - (y2 - y1) * CENTRE_RAISE
    return center, (x2 - x1 + y2 - y1) / REFERENCE_SCALE  # left to right, as theirs


class FaceAlignment:
    """face-alignment 3750f83's FaceAlignment(LandmarksType._2D, flip_input=False) on the store's
    `2DFAN-4.pth.tar` and `s3fd_convert.pth`: get_landmarks(rgb) is a list of (68, 2) arrays, one
    per detected face in the detector's order, or None when it finds none (as theirs)."""

    def __init__(self, store=None):
        from theval_mesh.backends.classic import s3fd_fa

        self.net, self.detector = load(store), s3fd_fa.Detector(store)

    @torch.inference_mode()
    def get_landmarks(self, rgb: np.ndarray, first_only: bool = False) -> list[np.ndarray] | None:
        """first_only: the first face's alone (what AKD reads, `kp[0]`), one FAN pass a frame."""
        boxes = self.detector.detect_from_image(np.ascontiguousarray(rgb[..., ::-1]))
        if not len(boxes):
            return None
        out = []
        for box in boxes[:1] if first_only else boxes:
            center, scale = box_center_scale(box)
            inp = torch.from_numpy(crop(rgb, center, scale).transpose(2, 0, 1)).float().div(255.0)[None]
            out.append(points_from_heatmaps(self.net(inp)[0], center, scale))
        return out


def provenance(store=None) -> str:
    """What computed AKD: the code followed and both networks' files (with their checksums)."""
    from theval_mesh.backends.classic import s3fd_fa
    from theval_mesh.backends.classic.networks import describe

    return (f"AliaksandrSiarohin/pose-evaluation (1bc4cae) cmp_kp.py on 1adrianb/face-alignment (3750f83) "
            f"landmarks: FAN {describe(NAME, store)}, S3FD {describe(s3fd_fa.NAME, store)}; the first face's 68 "
            "points, mean absolute coordinate difference in the GT's pixels, frames without a generated face left "
            "out, a model's AKD over all its frames")


# ---------------------------------------------------------------- the STAND-IN 2DFAN-4.pth.tar
def stand_in_state(seed: int) -> dict:
    """The stand-in 2DFAN-4.pth.tar: {key: numpy array} of FAN's state dict by backends/stand_in's
    rules (the heatmap heads as score heads). Its peaks mean nothing; they move with the picture."""
    from theval_mesh.backends.stand_in.rules import seeded_state

    return seeded_state(FAN(), seed, tuple(f"l{i}" for i in range(STACKS)))
