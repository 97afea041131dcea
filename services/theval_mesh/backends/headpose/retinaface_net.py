"""retina-face 0.0.17's Keras RetinaFace-R50 network (model/retinaface_model.py, "model" below) as a
torch module, loading the Keras HDF5 weights file (`retinaface.h5`, as `model.save_weights` writes
it) by layer name, and the whole `detect_faces` call around it (pure/retinaface.py).

Same layers in the same order of operations. Conventions translated:
  - Keras ZeroPadding2D((p, p)) then a 'valid' conv (every conv, model:105-1390) = torch conv with
    padding p (symmetric, so stride 2 samples the same pixels); the 3x3/2 max pool pads with
    ZEROS (model:120-122), not -inf: done with F.pad then a valid pool;
  - BatchNormalization (inference): x * (gamma / sqrt(var + eps)) + (beta - mean * that), in
    float32, eps 1.9999999494757503e-05 (model:101...);
  - channel-last kernels (kh, kw, in, out) -> torch (out, in, kh, kw); the network runs
    channel-first, outputs are returned channel-last like Keras's;
  - FPN: nearest x2 upsampling (model:1015, 1129, UpSampling2D 'nearest', not bilinear), then a
    crop to the finer map's size at offset (up - fine) // 2 (model:1027-1031, 1145-1149): 0 or 0
    (the x2 map exceeds the finer one by at most 1 pixel), i.e. the top-left part;
  - class scores: a 4-channel conv (c0..c3) re-laid out as softmax(c0, c2) for anchor 0 and
    softmax(c1, c3) for anchor 1 (model:1211-1270), returned as (background a0, background a1,
    face a0, face a1).
Importing this module needs torch; reading weights needs h5py (the `headpose` extra).
"""
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from theval_mesh.pure import retinaface as rf

WEIGHTS_FILE = "retinaface.h5"  # the name retina-face reads: model:55


class RetinaFaceNet(nn.Module):
    """Parameters are buffers named like the Keras layers: {layer}.{kernel|bias|gamma|...}."""

    def __init__(self):
        super().__init__()
        self.kinds = {}
        for name, kind, shape in rf.layers():
            self.kinds[name] = kind
            if kind == "bn":
                for w in rf.WEIGHTS["bn"]:
                    self.register_buffer(f"{name}__{w}", torch.zeros(shape))
            else:
                kh, kw, cin, cout = shape
                self.register_buffer(f"{name}__kernel", torch.zeros(cout, cin, kh, kw))
                if kind == "conv_b":
                    self.register_buffer(f"{name}__bias", torch.zeros(cout))
        self._folded = {}

    # -------------------------------------------------------------------- weights
    def load_h5(self, path) -> "RetinaFaceNet":
        """Read every weighted layer's group by name (h5 layout of tf_keras `save_weights`:
        /<layer>/<layer>/<weight>:0); a missing layer or a shape mismatch raises."""
        import h5py

        with h5py.File(Path(path), "r") as f:
            for name, kind, shape in rf.layers():
                group = f[name]
                names = [n.decode() if isinstance(n, bytes) else n for n in group.attrs["weight_names"]]
                values = {n.split("/")[-1].split(":")[0]: np.asarray(group[n]) for n in names}
                for w in rf.WEIGHTS[kind]:
                    v = values[w]
                    if w == "kernel":
                        if v.shape != shape:
                            raise ValueError(f"{path}: {name}/kernel is {v.shape}, expected {shape}")
                        v = v.transpose(3, 2, 0, 1)
                    buf = getattr(self, f"{name}__{w}")
                    if tuple(buf.shape) != v.shape:
                        raise ValueError(f"{path}: {name}/{w} is {v.shape}, expected {tuple(buf.shape)}")
                    buf.copy_(torch.from_numpy(np.ascontiguousarray(v, np.float32)))
        self._folded = {}
        return self

    def _bn_affine(self, name):
        if name not in self._folded:  # float32, the tf.nn.batch_normalization form
            g, b, m, v = (getattr(self, f"{name}__{w}") for w in rf.WEIGHTS["bn"])
            scale = g * torch.rsqrt(v + torch.tensor(rf.EPS, dtype=torch.float32))
            self._folded[name] = (scale.view(1, -1, 1, 1), (b - m * scale).view(1, -1, 1, 1))
        return self._folded[name]

    # -------------------------------------------------------------------- layers
    def bn(self, name, x):
        scale, shift = self._bn_affine(name)
        return x * scale + shift

    def conv(self, name, x, stride=1):
        w = getattr(self, f"{name}__kernel")
        bias = getattr(self, f"{name}__bias") if self.kinds[name] == "conv_b" else None
        return F.conv2d(x, w, bias, stride=stride, padding=w.shape[-1] // 2)

    def bn_relu(self, name, x):
        return F.relu(self.bn(name, x))

    # -------------------------------------------------------------------- network
    def backbone(self, x):
        """Pre-activation ResNet-50 (model:101-976); returns the stride 8, 16, 32 features:
        stage3_unit1_relu2, stage4_unit1_relu2 (taken INSIDE the first unit of stages 3 and 4,
        model:526-533, 844-851) and relu1 after the last bn1."""
        x = self.bn("bn_data", x)  # model:101: a BatchNorm on the raw pixels
        x = self.bn_relu("bn0", self.conv("conv0", x, stride=2))  # model:105-118
        x = F.max_pool2d(F.pad(x, (1, 1, 1, 1)), 3, 2)  # model:120-122, zero padding
        taps = []
        for s, units in enumerate(rf.UNITS, start=1):
            for u in range(1, units + 1):
                p = f"stage{s}_unit{u}_"
                stride = 2 if (u == 1 and s > 1) else 1  # on conv2 and sc: model:316, 304
                act1 = self.bn_relu(p + "bn1", x)
                act2 = self.bn_relu(p + "bn2", self.conv(p + "conv1", act1))
                if u == 1 and s in (3, 4):
                    taps.append(act2)
                act3 = self.bn_relu(p + "bn3", self.conv(p + "conv2", act2, stride))
                short = self.conv(p + "sc", act1, stride) if u == 1 else x
                x = self.conv(p + "conv3", act3) + short  # model:180, Add(conv3, shortcut)
        taps.append(self.bn_relu("bn1", x))
        return taps

    @staticmethod
    def _up_crop(coarse, fine):
        up = F.interpolate(coarse, scale_factor=2, mode="nearest")
        dy, dx = (up.shape[2] - fine.shape[2]) // 2, (up.shape[3] - fine.shape[3]) // 2
        return up[:, :, dy:dy + fine.shape[2], dx:dx + fine.shape[3]]

    def ssh(self, m, x):
        """SSH detection module (model:993-1400): concat(conv1_bn, context conv2_bn,
        context conv3_2_bn) then ReLU; BN without ReLU on the three concatenated branches."""
        c = f"ssh_{m}_det_"
        a = self.bn(c + "conv1_bn", self.conv(c + "conv1", x))
        ctx = self.bn_relu(c + "context_conv1_bn", self.conv(c + "context_conv1", x))
        b = self.bn(c + "context_conv2_bn", self.conv(c + "context_conv2", ctx))
        ctx3 = self.bn_relu(c + "context_conv3_1_bn", self.conv(c + "context_conv3_1", ctx))
        d = self.bn(c + "context_conv3_2_bn", self.conv(c + "context_conv3_2", ctx3))
        return F.relu(torch.cat([a, b, d], dim=1))

    def forward(self, x_nhwc: torch.Tensor):
        """x: (1, H, W, 3) float32 as pure/retinaface.network_input makes it. Returns the nine
        outputs channel-last (stride 32, 16, 8 x class probabilities, boxes, landmarks)."""
        c8, c16, c32 = self.backbone(x_nhwc.permute(0, 3, 1, 2))
        p32 = self.bn_relu("ssh_c3_lateral_bn", self.conv("ssh_c3_lateral", c32))
        lat16 = self.bn_relu("ssh_c2_lateral_bn", self.conv("ssh_c2_lateral", c16))
        p16 = self.bn_relu("ssh_c2_aggr_bn", self.conv("ssh_c2_aggr", lat16 + self._up_crop(p32, lat16)))
        lat8 = self.bn_relu("ssh_m1_red_conv_bn", self.conv("ssh_m1_red_conv", c8))
        p8 = self.bn_relu("ssh_c1_aggr_bn", self.conv("ssh_c1_aggr", lat8 + self._up_crop(p16, lat8)))
        outs = []
        for m, feat, stride in (("m3", p32, 32), ("m2", p16, 16), ("m1", p8, 8)):
            f = self.ssh(m, feat)
            logits = self.conv(f"face_rpn_cls_score_stride{stride}", f)
            pairs = torch.stack([logits[:, 0:2], logits[:, 2:4]], dim=-1)  # (N, anchor, H, W, bg|face)
            prob = torch.softmax(pairs, dim=-1)
            prob = torch.cat([prob[..., 0], prob[..., 1]], dim=1)  # bg a0, bg a1, face a0, face a1
            for t in (prob, self.conv(f"face_rpn_bbox_pred_stride{stride}", f),
                      self.conv(f"face_rpn_landmark_pred_stride{stride}", f)):
                outs.append(t.permute(0, 2, 3, 1).contiguous())
        return outs


class RetinaFaceDetector:
    """`RetinaFace.detect_faces(frame)` of retina-face 0.0.17 (threshold 0.9, upscaling allowed)
    with the torch network. frame: the HxWx3 uint8 array the caller would pass to the package
    (THEval passes RGB)."""

    def __init__(self, weights: Path, threads: int | None = None, plan=None, store=None):
        """plan: backends.inference.plan.NetworkPlan (default: eager torch on the CPU, fp32);
        store: where the exported network is cached (the weights' folder by default)."""
        from theval_mesh.backends.checksum import sha256_file
        from theval_mesh.backends.inference.plan import TORCH_CPU

        self.plan = plan or TORCH_CPU
        self.net = RetinaFaceNet().load_h5(weights).eval()
        if self.plan.runtime == "torch":
            self.net = self.net.to(self.plan.device)
        else:
            from theval_mesh.backends.inference.networks import retinaface_on_runtime
            self.net = retinaface_on_runtime(self.net, self.plan, store or Path(weights).parent,
                                             sha256_file(weights))
        self.device = self.plan.device if self.plan.runtime == "torch" else "cpu"  # the input tensor's
        self.threads = threads

    def outputs(self, frame: np.ndarray):
        import cv2

        height, width = frame.shape[:2]
        scale = rf.resize_scale(height, width)
        img = frame
        if scale != 1.0:  # preprocess.py:115-116
            img = cv2.resize(frame, None, None, fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
        x = torch.from_numpy(rf.network_input(img)).to(self.device)
        if self.threads:
            torch.set_num_threads(self.threads)
        with torch.inference_mode(), self.plan.autocast():
            outs = [o.float().cpu().numpy() for o in self.net(x)]
        return outs, img.shape[0], img.shape[1], scale

    def detect(self, frame: np.ndarray, threshold: float = rf.THRESHOLD) -> dict:
        outs, h, w, scale = self.outputs(frame)
        return rf.detect(outs, h, w, scale, threshold)
