"""FID over video frames, as pytorch-fid 0.3.0's `fid_score` computes it between two folders of images.

The network is pytorch-fid's FID Inception (the TF 2015-12-05 Inception-v3 ported to PyTorch:
torchvision's Inception3 with 1008 classes and the four FID variants of its Mixed blocks), built
here from torchvision's blocks plus our FID variants, and loaded STRICTLY (every key, no extra) from
`pt_inception-2015-12-05-6726825d.pth` in the weights store (registry.CLASSIC_MODELS['fid-inception']).
Features: pool3, the 2048-d global average after Mixed_7c, as pytorch-fid's
`InceptionV3([3], resize_input=True, normalize_input=True)`: bilinear resize to 299x299
(align_corners=False) of the [0, 1] image, then 2x - 1, then the blocks.

Input, pytorch-fid vs here: pytorch-fid reads image FILES (ImagePathDataset: PIL open, convert('RGB'),
ToTensor, so uint8 / 255 in float32, CHW); we feed DECODED RGB uint8 frames (H, W, 3) and do the same
uint8 / 255. A frame written losslessly as PNG and read back is the same uint8 array, so the features
are the same (tests/integration/test_fid_fvd_parity.py checks it against pytorch-fid's own code).
Which frames: EVERY frame the iterator yields (this module does not sample); the caller decides and
states it, and the sample size travels with the features (`FidFeatures.n`).

Statistics: mean and UNBIASED covariance (np.cov, as pytorch-fid) of the features in float64, then
`pure.metrics.classic.frechet_distance` (pytorch-fid's calculate_frechet_distance, including its
singular-product nudge and its refusal of a large imaginary part). FID is biased with few samples
(and with fewer frames than 2048 both covariances are singular): compare values at equal N only.
"""
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from theval_mesh.backends.classic import networks
from theval_mesh.pure.errors import WeightsMissing
from theval_mesh.pure.metrics.classic import frechet_distance, frechet_distance_torchmetrics

NAME = "fid-inception"
TORCHSCRIPT_NAME = "fid-inception-torchscript"  # the same network as StyleGAN2-ADA's TorchScript (clean-fid's)
FEATURES = 2048
SIZE = 299  # pytorch-fid's resize_input target, and clean-fid's


def _blocks():
    """Our FID variants of torchvision's Inception blocks (pytorch-fid / the TF graph differ from
    torchvision's in their pooling branches): average pools that do not count the zero padding,
    and a max pool in the last block's pool branch."""
    import torch
    import torch.nn.functional as F
    from torchvision.models import inception as tv

    def avg(x):
        return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)

    class BlockA(tv.InceptionA):
        def forward(self, x):
            b5 = self.branch5x5_2(self.branch5x5_1(x))
            b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
            return torch.cat([self.branch1x1(x), b5, b3, self.branch_pool(avg(x))], 1)

    class BlockC(tv.InceptionC):
        def forward(self, x):
            b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
            d = x
            for conv in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3,
                         self.branch7x7dbl_4, self.branch7x7dbl_5):
                d = conv(d)
            return torch.cat([self.branch1x1(x), b7, d, self.branch_pool(avg(x))], 1)

    class BlockE(tv.InceptionE):
        max_pool = False  # the last block (Mixed_7c) pools with max in the TF graph

        def forward(self, x):
            b3 = self.branch3x3_1(x)
            b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
            d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
            d = torch.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
            pooled = F.max_pool2d(x, 3, 1, 1) if self.max_pool else avg(x)
            return torch.cat([self.branch1x1(x), b3, d, self.branch_pool(pooled)], 1)

    class BlockEMax(BlockE):
        max_pool = True

    return BlockA, BlockC, BlockE, BlockEMax


def build_network():
    """The FID Inception with uninitialised weights (its state_dict has the weight file's keys)."""
    from torchvision.models import inception_v3

    A, C, E, EMax = _blocks()
    net = inception_v3(weights=None, aux_logits=False, num_classes=1008, init_weights=False)
    net.Mixed_5b, net.Mixed_5c, net.Mixed_5d = A(192, 32), A(256, 64), A(288, 64)
    net.Mixed_6b, net.Mixed_6c, net.Mixed_6d, net.Mixed_6e = C(768, 128), C(768, 160), C(768, 160), C(768, 192)
    net.Mixed_7b, net.Mixed_7c = E(1280), EMax(2048)
    return net.eval()


POOL3 = ("Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "maxpool1", "Conv2d_3b_1x1", "Conv2d_4a_3x3",
         "maxpool2", "Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d",
         "Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c", "avgpool")  # to pool3, as pytorch-fid's blocks 0-3


def load_network(store=None):
    """The FID Inception with the store's weights, every key loaded (WeightsMissing names the file
    and the fix when it is absent, not the published file and not a recorded stand-in, or its keys
    differ)."""
    state = networks.load(NAME, store)
    net = build_network()
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise WeightsMissing(f"FID skipped: {networks.weight_file(NAME, store)} is not the FID Inception "
                             f"state dict ({str(err).splitlines()[0]} ...)") from None
    return net


def pool3(net, images):
    """pool3 features (B, 2048) of float images (B, 3, H, W) in [0, 1]."""
    import torch.nn.functional as F

    x = F.interpolate(images, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return _through_pool3(net, 2 * x - 1)


def _through_pool3(net, x):
    """The blocks from the 299 px input in [-1, 1] to pool3: (B, 2048)."""
    import torch

    with torch.no_grad():
        for name in POOL3:
            x = getattr(net, name)(x)
    return x.flatten(1)


@dataclass(frozen=True)
class FidFeatures:
    features: np.ndarray = field(repr=False)  # (N, 2048) float64, one row a frame

    @property
    def n(self) -> int:
        return len(self.features)


def _batches(frames: Iterable, batch_size: int) -> Iterator[np.ndarray]:
    batch = []
    for item in frames:
        frame = item[1] if isinstance(item, tuple) else item  # MediaReader.frames() yields (index, frame)
        batch.append(np.asarray(frame, np.uint8))
        if len(batch) == batch_size:
            yield np.stack(batch)
            batch = []
    if batch:
        yield np.stack(batch)


def inception_features(frames: Iterable, store=None, batch_size: int = 32, net=None,
                       variant: str = "pytorch-fid") -> FidFeatures:
    """pool3 features of every frame: RGB uint8 (H, W, 3) arrays, or MediaReader.frames()'
    (index, frame) pairs, as `variant` (VARIANTS) computes them. Frames of one batch must share a
    size (pytorch-fid's DataLoader needs that too). net: a loaded network to reuse (load_variant)."""
    v = VARIANTS[variant]
    net = net if net is not None else v.load(store)
    rows = [v.features(net, batch) for batch in _batches(frames, batch_size)]
    if not rows:
        raise ValueError("FID: no frames")
    return FidFeatures(np.concatenate(rows))


def _pytorch_fid(net, batch: np.ndarray) -> np.ndarray:
    """pytorch-fid 0.3.0: ToTensor's uint8 / 255, then InceptionV3's bilinear resize and 2x - 1."""
    import torch

    images = torch.from_numpy(batch).permute(0, 3, 1, 2).float().div(255)
    return pool3(net, images).double().numpy()


def _clean_fid_legacy_pytorch(net, batch: np.ndarray) -> np.ndarray:
    """clean-fid 0.1.35 mode "legacy_pytorch" (resize.py build_resizer: make_resizer("PyTorch",
    False, "bilinear", (299, 299))): the [0, 255] frame resized bilinear (align_corners=False)
    outside the network and clipped to [0, 255]; then features.py's `model(x / 255)` with
    pytorch-fid's InceptionV3(resize_input=False): 2x - 1, the same FID Inception."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(batch).permute(0, 3, 1, 2).float()
    x = F.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False).clamp(0, 255)
    return _through_pool3(net, 2 * (x / 255) - 1).numpy().astype(np.float64)


def _torchmetrics(net, batch: np.ndarray) -> np.ndarray:
    """torchmetrics 1.9.0 FrechetInceptionDistance(feature=2048), its default antialias=True:
    NoTrainInceptionV3's forward on the uint8 frame as float, resized to 299 bilinear WITH
    antialiasing (align_corners=False), then (x - 128) / 128 into torch-fidelity 0.4.0's InceptionV3
    (the FID Inception's blocks and weights) to the 2048-d pool, in float32; update() keeps it as
    float64."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(batch).permute(0, 3, 1, 2).float()
    x = F.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False, antialias=True)
    return _through_pool3(net, (x - 128) / 128).double().numpy()


def pil_bicubic(frame: np.ndarray, size: int = SIZE, clip: bool = True) -> np.ndarray:
    """clean-fid 0.1.35 mode "clean" (resize.py make_resizer("PIL", False, "bicubic", (299, 299))):
    each channel as a float32 PIL image resized bicubic (PIL antialiases), clipped to [0, 255]:
    (size, size, 3) float32. clip=False: the older copy in DisCo's tool/metrics/resize.py."""
    from PIL import Image

    channels = [np.asarray(Image.fromarray(frame[:, :, c].astype(np.float32)).resize((size, size), Image.BICUBIC))
                for c in range(3)]
    out = np.stack(channels, axis=2).astype(np.float32)
    return out.clip(0, 255) if clip else out


def _clean_fid(net, batch: np.ndarray) -> np.ndarray:
    """clean-fid 0.1.35 mode "clean": pil_bicubic, then inception_torchscript.py InceptionV3W's
    forward without resize_inside: (x - 128) / 128 into the TorchScript's `layers`, 2048-d."""
    import torch

    x = torch.from_numpy(np.stack([pil_bicubic(f) for f in batch])).permute(0, 3, 1, 2)
    with torch.no_grad():
        return net.layers.forward((x - 128) / 128).view((len(batch), FEATURES)).numpy().astype(np.float64)


def load_torchscript(store=None):
    """StyleGAN2-ADA's TorchScript FID Inception (inception-2015-12-05.pt, clean-fid's network)."""
    return networks.load(TORCHSCRIPT_NAME, store).eval()


@dataclass(frozen=True)
class FidVariant:
    """One implementation of FID that papers report under that name: the code it follows (release
    and commit), the network file it loads, how a frame becomes features and how two sets of
    features become a distance: pytorch-fid's (mean and unbiased covariance, a matrix square root,
    in float64) for all but torchmetrics, which has its own (eigenvalues; float32). clean-fid
    takes the mean of its float32 features in float32, a difference within 1e-6 relative; each is
    measured against its own code in tests/integration/test_fid_variants.py."""
    name: str
    follows: str
    network: str  # registry.CLASSIC_MODELS name of its weights
    what: str  # the preprocessing, in provenance
    features: Callable = field(repr=False)
    load: Callable = field(repr=False)
    distance: Callable = field(default=frechet_distance, repr=False)  # (generated, GT) features -> FID
    ddof: int = 1  # every variant's covariance is the unbiased one (for the interval)


VARIANTS = {v.name: v for v in (
    FidVariant("pytorch-fid", "mseitzer/pytorch-fid 0.3.0", NAME,
               "pytorch-fid's FID Inception, pool3 2048-d of every frame resized to 299 bilinear",
               _pytorch_fid, load_network),
    FidVariant("clean-fid", "GaParmar/clean-fid 0.1.35 (c8ffa42), mode clean", TORCHSCRIPT_NAME,
               "clean-fid's 'clean' mode: every frame resized to 299 by PIL bicubic (antialiased) per channel in "
               "float, (x - 128) / 128, the TorchScript Inception's pool 2048-d",
               _clean_fid, load_torchscript),
    FidVariant("clean-fid-legacy-pytorch", "GaParmar/clean-fid 0.1.35 (c8ffa42), mode legacy_pytorch", NAME,
               "clean-fid's 'legacy_pytorch' mode: every frame resized to 299 bilinear in [0, 255] and clipped, "
               "pytorch-fid's FID Inception, pool3 2048-d",
               _clean_fid_legacy_pytorch, load_network),
    # torch-fidelity's weights-inception-2015-12-05-6726825d.pth is pytorch-fid's file (the same
    # sha256 prefix; its keys load strictly into torch-fidelity's network): one network here.
    FidVariant("torchmetrics", "Lightning-AI/torchmetrics 1.9.0 FrechetInceptionDistance(feature=2048) with "
               "toshas/torch-fidelity 0.4.0", NAME,
               "torchmetrics' default: every frame resized to 299 bilinear with antialiasing in [0, 255], "
               "(x - 128) / 128, the FID Inception's pool 2048-d; the distance from the eigenvalues of the "
               "covariances' product, in float32",
               _torchmetrics, load_network, frechet_distance_torchmetrics),
)}
DEFAULT_VARIANT = "pytorch-fid"


def fid(a: FidFeatures | np.ndarray, b: FidFeatures | np.ndarray) -> float:
    """FID between two feature sets (pytorch-fid's statistics and distance)."""
    fa = a.features if isinstance(a, FidFeatures) else a
    fb = b.features if isinstance(b, FidFeatures) else b
    return frechet_distance(fa, fb)


def stand_in_state(seed: int) -> dict:
    """The stand-in pt_inception-2015-12-05-6726825d.pth: {key: numpy array} for every key of the
    network's state_dict (BatchNorm's num_batches_tracked included, so it loads strictly with any
    torch), by backends/stand_in's rules, the 1008-class `fc` (unused by pool3) as a score head."""
    from theval_mesh.backends.stand_in.rules import seeded_state

    return seeded_state(build_network(), seed, last_linear=("fc",))


def write_torchscript(path, seed: int) -> dict:
    """The stand-in inception-2015-12-05.pt in the published file's format: a TorchScript archive
    whose `layers` maps a normalised (B, 3, 299, 299) image to pool3 (B, 2048, 1, 1) features, as
    clean-fid's InceptionV3W calls it, holding the SAME stand-in weights as pt_inception's (the two
    files are one network in two formats). Its forward(img, return_features) resizes bilinear and
    normalises: the published file resizes the TensorFlow way instead, so clean-fid's
    legacy_tensorflow mode is not offered on stand-ins. Returns the state's values (STAND-IN.json)."""
    from pathlib import Path

    import torch
    import torch.nn.functional as F

    state = stand_in_state(seed)
    net = build_network()
    net.load_state_dict({k: torch.from_numpy(np.array(v, order="C")) for k, v in state.items()}, strict=True)

    class Pool3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name in POOL3:
                setattr(self, name, getattr(net, name))

        def forward(self, x):
            for name in POOL3:
                x = getattr(self, name)(x)
            return x

    class TorchScriptInception(torch.nn.Module):
        def __init__(self, layers):
            super().__init__()
            self.layers = layers

        def forward(self, img: torch.Tensor, return_features: bool = False) -> torch.Tensor:
            x = F.interpolate(img, size=(299, 299), mode="bilinear", align_corners=False)
            return self.layers((x - 128) / 128).flatten(1)

    with torch.no_grad():
        layers = torch.jit.trace(Pool3().eval(), torch.zeros(1, 3, SIZE, SIZE))
    scripted = torch.jit.script(TorchScriptInception(layers).eval())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    scripted.save(str(path))
    return state
