"""S3FD, the face detector of syncnet_python's run_pipeline.py, layer for layer under the state-dict
names of its `S3FDNet` (detectors/s3fd/nets.py), so `sfd_face.pth` loads strictly; the box
arithmetic (priors, decoding, both NMS passes) is pure/metrics/s3fd_boxes.py.

detect_faces as detectors/s3fd/__init__.py does it: the RGB frame resized by each scale (cv2
bilinear), channels first, the BGR mean (104, 117, 123) subtracted from the matching channels
(it flips to BGR, subtracts and flips back: the network reads RGB minus (123, 117, 104)), the
network, a softmax over (background, face), Detect, the boxes above conf_th in the frame's pixels
and a last NMS at IoU 0.1. run_pipeline.py calls it with conf_th 0.9 and scales [0.25].
"""
import cv2
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from theval_mesh.backends.classic.networks import weight_file
from theval_mesh.pure.errors import WeightsMissing
from theval_mesh.pure.metrics import s3fd_boxes as sb

NAME = "s3fd"  # registry.CLASSIC_MODELS key
CONF_TH = 0.9      # run_pipeline.py inference_video: detect_faces(conf_th=0.9, ...)
SCALES = (0.25,)   # run_pipeline.py --facedet_scale default
L2NORM_SCALES = {"L2Norm3_3": (256, 10.0), "L2Norm4_3": (512, 8.0), "L2Norm5_3": (512, 5.0)}
_MEAN = np.array(sb.MEAN_RGB, np.float32)[:, None, None]

# VGG-16 to conv5_3, then fc6 (dilated 3x3) and fc7 (1x1) as convolutions; "M" a 2x2 max pool,
# "C" the one with ceil_mode (syncnet_python detectors/s3fd/nets.py:53)
_VGG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "C", 512, 512, 512, "M", 512, 512, 512, "M"]
_SOURCES = (256, 512, 512, 1024, 512, 256)  # channels of conv3_3, conv4_3, conv5_3, fc7, conv6_2, conv7_2
CONV3_3, CONV4_3, CONV5_3 = 16, 23, 30      # vgg indices where the three normalised sources are taken


class L2Norm(nn.Module):
    def __init__(self, channels: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.full((channels,), float(scale)))

    def forward(self, x):
        norm = x.pow(2).sum(dim=1, keepdim=True).sqrt() + 1e-10
        return self.weight[None, :, None, None] * (x / norm)


class S3FDNet(nn.Module):
    """face_alignment=True: the variant of face-alignment 3750f83 (detection/sfd/net_s3fd.py): fc6
    a plain 3x3 conv of padding 3 (not dilated 6: its maps are 4 cells wider than the stride says)
    and a floor third pool. The tensors are the same; their names differ (backends/classic/s3fd_fa.py)."""

    def __init__(self, face_alignment: bool = False):
        super().__init__()
        layers, cin = [], 3
        for v in _VGG:
            if v in ("M", "C"):
                layers.append(nn.MaxPool2d(2, 2, ceil_mode=v == "C" and not face_alignment))
            else:
                layers += [nn.Conv2d(cin, v, 3, 1, padding=1), nn.ReLU(inplace=True)]
                cin = v
        fc6 = nn.Conv2d(512, 1024, 3, 1, padding=3) if face_alignment else \
            nn.Conv2d(512, 1024, 3, 1, padding=6, dilation=6)
        layers += [fc6, nn.ReLU(inplace=True),
                   nn.Conv2d(1024, 1024, 1, 1), nn.ReLU(inplace=True)]
        self.vgg = nn.ModuleList(layers)
        for name, (channels, scale) in L2NORM_SCALES.items():
            setattr(self, name, L2Norm(channels, scale))
        self.extras = nn.ModuleList([nn.Conv2d(1024, 256, 1, 1), nn.Conv2d(256, 512, 3, 2, padding=1),
                                     nn.Conv2d(512, 128, 1, 1), nn.Conv2d(128, 256, 3, 2, padding=1)])
        self.loc = nn.ModuleList([nn.Conv2d(c, 4, 3, 1, padding=1) for c in _SOURCES])
        # conv3_3 scores three background logits and one face logit (max-out background)
        self.conf = nn.ModuleList([nn.Conv2d(c, 4 if k == 0 else 2, 3, 1, padding=1)
                                   for k, c in enumerate(_SOURCES)])

    def forward(self, x):
        """(loc (N, 4), face probability (N,), map sizes) for one image (1, 3, H, W)."""
        sources = []
        for k, layer in enumerate(self.vgg):
            x = layer(x)
            if k + 1 == CONV3_3:
                sources.append(self.L2Norm3_3(x))
            elif k + 1 == CONV4_3:
                sources.append(self.L2Norm4_3(x))
            elif k + 1 == CONV5_3:
                sources.append(self.L2Norm5_3(x))
        sources.append(x)
        for k, layer in enumerate(self.extras):
            x = F.relu(layer(x))
            if k % 2 == 1:
                sources.append(x)
        locs, confs = [], []
        for k, s in enumerate(sources):
            c = self.conf[k](s)
            if k == 0:  # max of the three background logits (nets.py:144-145)
                c = torch.cat((c[:, :3].max(dim=1, keepdim=True).values, c[:, 3:]), dim=1)
            locs.append(self.loc[k](s).permute(0, 2, 3, 1).reshape(-1, 4))
            confs.append(c.permute(0, 2, 3, 1).reshape(-1, 2))
        maps = [tuple(s.shape[2:]) for s in sources]
        face = torch.softmax(torch.cat(confs), dim=-1)[:, 1]
        return torch.cat(locs), face, maps


def load_state(net: S3FDNet, state: dict, path, what: str = "LSE-C/LSE-D face detection",
               file: str = "sfd_face.pth") -> S3FDNet:
    try:
        net.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()}, strict=True)
    except RuntimeError as err:
        raise WeightsMissing(f"{what}: {path} is not S3FD's {file} "
                             f"({str(err).splitlines()[0]})") from None
    return net.eval()


class S3FD:
    """syncnet_python's S3FD detector on `sfd_face.pth` from the weights store (WeightsMissing when
    absent or not that network)."""

    def __init__(self, store=None):
        path = weight_file(NAME, store)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - a truncated or foreign file: torch raises many kinds
            raise WeightsMissing(f"LSE-C/LSE-D face detection: cannot load {path} "
                                 f"({type(err).__name__}: {err})") from None
        self.net = load_state(S3FDNet(), state, path)
        self.path, self.store = path, store

    def describe(self) -> str:
        from theval_mesh.backends.classic.networks import describe

        return f"S3FD {describe(NAME, self.store)} at conf {CONF_TH}, scale {SCALES[0]} (syncnet_python's)"

    def raw(self, rgb: np.ndarray, scale: float) -> np.ndarray:
        """Detect's output for one scale: (k, 5) score, x1, y1, x2, y2 relative to the resized frame."""
        img = cv2.resize(rgb, dsize=(0, 0), fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
        x = torch.from_numpy(img.transpose(2, 0, 1).astype(np.float32) - _MEAN)[None]
        with torch.inference_mode():
            loc, face, maps = self.net(x)
        priors = sb.prior_boxes(x.shape[2], x.shape[3], maps)
        return sb.detect(loc.numpy(), face.numpy(), priors)

    def detect_faces(self, rgb: np.ndarray, conf_th: float = CONF_TH, scales=SCALES) -> np.ndarray:
        """(n, 5) x1, y1, x2, y2, score in the frame's pixels, best first."""
        h, w = rgb.shape[:2]
        return sb.frame_boxes([self.raw(rgb, s) for s in scales], w, h, conf_th)


# ---------------------------------------------------------------- the STAND-IN sfd_face.pth
# Random weights cannot find faces, so the stand-in's heads are DESIGNED (the rest follows
# backends/stand_in's rules): only the coarsest level, conv7_2 (stride 128, a 512-px anchor),
# calls anything a face, with a fixed face logit; its box is the anchor shrunk to a face's size
# plus a small content-dependent shift, so boxes move a few pixels with the picture. At
# run_pipeline.py's scale 0.25 a 512x512 frame is a 128-px input whose conv7_2 map is one cell at
# the centre: ONE face box per frame, centred, 230 px wide, whatever the picture (black frames
# too): a CENTRE-PRIOR detector. A larger frame has one box per 512-px cell of it.
STAND_IN_FACE_LOGIT = 12.0   # face over background at conv7_2; -12 at every other level
STAND_IN_SIDE = 0.1125       # box side over anchor side: 512 input px at scale 0.25 = 2048 px -> 230 px
STAND_IN_CONTENT = 5e-5      # std of conv7_2's box-delta weights: its features' norm is 330-440 on the
#                              parity clips (calibrated once), so deltas vary by ~0.02 (centre ~4 px)


def stand_in_state(seed: int) -> dict:
    """The stand-in sfd_face.pth: {key: numpy array} of S3FDNet's state dict (the design above)."""
    from theval_mesh.backends.stand_in.rules import normal, seeded_state

    state = seeded_state(S3FDNet(), seed)
    coarsest = len(_SOURCES) - 1
    for k in range(len(_SOURCES)):
        conf_b = np.zeros_like(state[f"conf.{k}.bias"])
        conf_b[-1] = STAND_IN_FACE_LOGIT if k == coarsest else -STAND_IN_FACE_LOGIT
        state[f"conf.{k}.weight"] = np.zeros_like(state[f"conf.{k}.weight"])
        state[f"conf.{k}.bias"] = conf_b
        loc_w = f"loc.{k}.weight"
        state[loc_w] = (normal(seed, loc_w, state[loc_w].shape, STAND_IN_CONTENT) if k == coarsest
                        else np.zeros_like(state[loc_w]))
        shrink = np.log(STAND_IN_SIDE) / sb.VARIANCE[1] if k == coarsest else 0.0
        state[f"loc.{k}.bias"] = np.array([0.0, 0.0, shrink, shrink], np.float32)
    return state

