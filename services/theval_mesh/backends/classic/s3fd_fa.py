"""face-alignment's S3FD (1adrianb/face-alignment at 3750f83, detection/sfd/), the face detector of
its landmark pipeline (backends/classic/fan.py) and so of AKD. The tensors of `s3fd_convert.pth`
are S3FD's (backends/classic/s3fd.py, under other names, `NAMES`), but the network and its reading
differ from syncnet_python's: fc6 is a plain 3x3 conv of padding 3 (not dilated 6), the third pool
floors, the BGR frame goes in at full resolution minus (104, 117, 123), and its own box arithmetic
(pure/metrics/s3fd_boxes.py, `fa_`) keeps every box above 0.5 after one NMS at 0.3.
"""
import numpy as np
import torch
from torch import nn

from theval_mesh.backends.classic import s3fd
from theval_mesh.backends.classic.networks import weight_file
from theval_mesh.pure.metrics import s3fd_boxes as sb

NAME = "s3fd-fa"  # registry.CLASSIC_MODELS key
MEAN_BGR = np.array([104, 117, 123])  # detect.py:20
NMS_IOU, KEEP = 0.3, 0.5              # sfd_detector.py:52-54
_CONVS = ("conv1_1", "conv1_2", "conv2_1", "conv2_2", "conv3_1", "conv3_2", "conv3_3", "conv4_1", "conv4_2",
          "conv4_3", "conv5_1", "conv5_2", "conv5_3", "fc6", "fc7")
_SOURCES = ("conv3_3_norm", "conv4_3_norm", "conv5_3_norm", "fc7", "conv6_2", "conv7_2")


def _names() -> dict[str, str]:
    """face-alignment's module name -> S3FDNet's (net_s3fd.py:25-68)."""
    convs = [k for k, v in enumerate(s3fd.S3FDNet().vgg) if isinstance(v, nn.Conv2d)]
    names = {theirs: f"vgg.{k}" for theirs, k in zip(_CONVS, convs, strict=True)}
    names.update({f"conv{n}_{m}": f"extras.{k}" for k, (n, m) in enumerate(((6, 1), (6, 2), (7, 1), (7, 2)))})
    names.update({f"conv{n}_3_norm": f"L2Norm{n}_3" for n in (3, 4, 5)})
    for k, source in enumerate(_SOURCES):
        names[f"{source}_mbox_conf"], names[f"{source}_mbox_loc"] = f"conf.{k}", f"loc.{k}"
    return names


NAMES = _names()


def _renamed(state: dict, names: dict) -> dict:
    """The state with each key's module part renamed by `names` (a name it lacks stays)."""
    out = {}
    for key, value in state.items():
        module, _, param = key.rpartition(".")
        out[f"{names.get(module, module)}.{param}"] = value
    return out


class Detector:
    """SFDDetector(device).detect_from_image on the store's `s3fd_convert.pth`: a list of (5,)
    float32 rows x1, y1, x2, y2, score for a BGR frame, best first (WeightsMissing without it)."""

    def __init__(self, store=None):
        from theval_mesh.backends.classic.networks import load

        path = weight_file(NAME, store)
        self.net = s3fd.load_state(s3fd.S3FDNet(face_alignment=True), _renamed(load(NAME, store), NAMES),
                                   path, "AKD face detection", path.name)

    @torch.inference_mode()
    def detect_from_image(self, bgr: np.ndarray) -> list[np.ndarray]:
        x = torch.from_numpy((bgr - MEAN_BGR).transpose(2, 0, 1)[None].copy()).float()
        loc, face, maps = self.net(x)
        boxes = sb.fa_detect(loc.numpy(), face.numpy(), maps)
        return [row for row in boxes[sb.fa_nms(boxes, NMS_IOU)] if row[-1] > KEEP]


# ---------------------------------------------------------------- the STAND-IN s3fd_convert.pth
# s3fd.py's design on face-alignment's full-resolution input, where conv7_2's cells (512-px anchors)
# tile the frame: each calls its anchor, shrunk to a face's size, a face, with a probability that
# moves with the content, so the cells rank without ties; the best box comes first.
STAND_IN_SIDE = 0.45        # box side over the 512-px anchor: 230 px
STAND_IN_FACE_LOGIT = 2.0   # face over background before the content term
STAND_IN_CONTENT = 3e-4     # std of conv7_2's face-logit weights: their features' norm is 1,100-1,500 a
#                             cell on 256-px parity frames (calibrated once): logits spread by ~1


def stand_in_state(seed: int) -> dict:
    """The stand-in s3fd_convert.pth under face-alignment's names (the design above)."""
    from theval_mesh.backends.stand_in.rules import normal

    state = s3fd.stand_in_state(seed)
    k = len(_SOURCES) - 1
    weight = np.zeros_like(state[f"conf.{k}.weight"])
    weight[1] = normal(seed, f"fa.conf.{k}.weight", weight.shape[1:], STAND_IN_CONTENT)
    shrink = np.log(STAND_IN_SIDE) / sb.VARIANCE[1]
    state.update({f"conf.{k}.weight": weight, f"conf.{k}.bias": np.array([0.0, STAND_IN_FACE_LOGIT], np.float32),
                  f"loc.{k}.bias": np.array([0.0, 0.0, shrink, shrink], np.float32)})
    return _renamed(state, {ours: theirs for theirs, ours in NAMES.items()})
