"""FVD over videos, as StyleGAN-V's `src/metrics/frechet_video_distance.py` (universome/stylegan-v,
the FVD most video toolkits copy) computes it, with its detector `i3d_torchscript.pt` from the weights
store (registry.CLASSIC_MODELS['fvd-i3d']; a stand-in from backends/classic/i3d.py where the published
file cannot be had).

Per clip: CLIP_LENGTH = 16 consecutive frames (subsample_factor 1), RGB uint8 as float in [0, 255],
shaped (B, 3, 16, H, W) (StyleGAN-V's dataset batch permuted to [b, c, t, h, w]), and the detector
called as StyleGAN-V calls it: `detector(x, rescale=True, resize=True, return_features=True)`: the
detector itself maps [0, 255] to [-1, 1] and resizes every frame to 224x224 (trilinear over the
whole frame: no crop, a non-square frame is squashed), and returns the 400 I3D logits before the
softmax. Statistics as StyleGAN-V's FeatureStats: float64 mean and the BIASED covariance (divided by
N, not N - 1 as pytorch-fid's FID), then ||mu1 - mu2||^2 + Tr(s1 + s2 - 2 sqrtm(s1 s2)), keeping the
real part (np.real) whatever its imaginary part.

Clip sampling (ours, deterministic): from each video, consecutive NON-OVERLAPPING 16-frame windows
from frame 0 (frames 0-15, 16-31, ...), at most `clips_per_video` of them (None: all); a video with
fewer than 16 frames gives no clip (StyleGAN-V's discard_short_videos) and is counted as skipped.
StyleGAN-V takes ONE window per video (a random offset on the real side, offset 0 on the generated
side); clips_per_video=1 gives its generated-side sampling. FVD is biased with few clips (and with
fewer clips than 400 both covariances are singular): the result carries the clip and video counts.

What the published detector does inside (rescale, resize, logits) is read from its authors'
statements and the toolkits' calls, not from the file (not downloadable here): the parity test
proves our pipeline equals the toolkit's own code ON THE SAME DETECTOR, not that our stand-in I3D
equals the published one.

Variants (VARIANTS, `theval classic --fvd-variant`): the code papers report "FVD" from, each on the
same detector file; each proven against its own code (tests/integration/test_fvd_variants.py).
"""
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from theval_mesh.backends.classic import networks
from theval_mesh.pure.metrics.classic import feature_stats_moments, frechet_distance_stats, gaussian_stats

NAME = "fvd-i3d"
CLIP_LENGTH = 16
FEATURES = 400
DETECTOR_KWARGS = {"rescale": True, "resize": True, "return_features": True}  # StyleGAN-V's


def load_detector(store=None):
    """The TorchScript I3D from the store (WeightsMissing names the file and the fix)."""
    return networks.load(NAME, store).eval()


def clip_windows(frame_count: int, clips_per_video: int | None = None,
                 length: int = CLIP_LENGTH) -> list[tuple[int, int]]:
    """[(start, stop)] of the non-overlapping windows from frame 0 (module docstring)."""
    starts = range(0, frame_count - length + 1, length)
    windows = [(s, s + length) for s in starts]
    return windows if clips_per_video is None else windows[:clips_per_video]


def video_clips(frames: Iterable, clips_per_video: int | None = None,
                length: int = CLIP_LENGTH) -> Iterator[np.ndarray]:
    """(16, H, W, 3) uint8 clips of one video, from its frames (RGB uint8 arrays or MediaReader.frames()'
    (index, frame) pairs), read only as far as the last window needs."""
    clip, taken = [], 0
    for item in frames:
        if clips_per_video is not None and taken >= clips_per_video:
            return
        clip.append(np.asarray(item[1] if isinstance(item, tuple) else item, np.uint8))
        if len(clip) == length:
            yield np.stack(clip)
            clip, taken = [], taken + 1


@dataclass(frozen=True)
class FvdFeatures:
    features: np.ndarray = field(repr=False)  # (clips, 400) float64
    videos: int  # videos that gave at least one clip
    skipped_videos: int  # videos shorter than one clip

    @property
    def clips(self) -> int:
        return len(self.features)


def i3d_features(videos: Iterable[Iterable], store=None, clips_per_video: int | None = None,
                 batch_size: int = 4, detector=None) -> FvdFeatures:
    """I3D features of every clip of every video (each video an iterable of frames, see
    `video_clips`). batch_size clips per detector call (StyleGAN-V: 64 frames at 512 px, 4 clips)."""
    import torch

    detector = detector if detector is not None else load_detector(store)
    rows, batch, used, skipped = [], [], 0, 0

    def run():
        x = torch.from_numpy(np.stack(batch)).permute(0, 4, 1, 2, 3).float()  # (B, 3, T, H, W), [0, 255]
        with torch.no_grad():
            rows.append(detector(x, **DETECTOR_KWARGS).double().numpy())
        batch.clear()

    for video in videos:
        n = 0
        for clip in video_clips(video, clips_per_video):
            batch.append(clip)
            n += 1
            if len(batch) == batch_size:
                run()
        used, skipped = used + (n > 0), skipped + (n == 0)
    if batch:
        run()
    if not rows:
        raise ValueError(f"FVD: no video has {CLIP_LENGTH} frames")
    return FvdFeatures(np.concatenate(rows), used, skipped)


def fvd(a: FvdFeatures | np.ndarray, b: FvdFeatures | np.ndarray) -> float:
    """FVD between two clip feature sets, StyleGAN-V's statistics (biased covariance) and distance."""
    fa = a.features if isinstance(a, FvdFeatures) else a
    fb = b.features if isinstance(b, FvdFeatures) else b
    return frechet_distance_stats(*gaussian_stats(fa, ddof=0), *gaussian_stats(fb, ddof=0),
                                  imaginary_atol=None)


def _stylegan_v(detector, frames: list) -> np.ndarray:
    """StyleGAN-V's clips: every non-overlapping 16-frame window (module docstring); none from a
    video shorter than one."""
    try:
        return i3d_features([frames], detector=detector).features
    except ValueError:  # i3d_features' "no video has 16 frames"
        return np.zeros((0, FEATURES))


def shorter_side_crop(video, size: int = 224, antialias: bool = False):
    """common_metrics_on_video_quality's preprocess_single on a (C, T, H, W) float video: the
    shorter side scaled to `size` (the other to ceil), bilinear per frame, then the centre crop.
    antialias: cd-fvd's data_utils.preprocess, the same steps with an antialiased bilinear on its
    (T, C, H, W) clip (only the last two axes are resized, so either order works)."""
    import torch.nn.functional as F

    _, _, h, w = video.shape
    scale = size / min(h, w)
    target = (size, math.ceil(w * scale)) if h < w else (math.ceil(h * scale), size)
    video = F.interpolate(video, size=target, mode="bilinear", align_corners=False, antialias=antialias)
    _, _, h, w = video.shape
    top, left = (h - size) // 2, (w - size) // 2
    return video[:, :, top:top + size, left:left + size]


def _first_clip(frames: list):
    """common_metrics' only_final=True input: a video's first 16 frames (T, H, W, 3) uint8, or None
    when it is shorter."""
    return next(iter(video_clips(frames, clips_per_video=1)), None)


def _common_metrics_styleganv(detector, frames: list) -> np.ndarray:
    """common_metrics_on_video_quality's calculate_fvd(method='styleganv', only_final=True) on a video
    cut to its first 16 frames: the frames in [0, 1] (uint8 / 255, float32), the shorter side to 224
    and the centre crop, (x - 0.5) * 2, the detector with rescale and resize off. One clip a video."""
    import torch

    clip = _first_clip(frames)
    if clip is None:
        return np.zeros((0, FEATURES))
    video = (torch.from_numpy(clip).float() / 255.0).permute(3, 0, 1, 2)  # (C, T, H, W) in [0, 1]
    x = ((shorter_side_crop(video) - 0.5) * 2).contiguous()[None]
    with torch.no_grad():
        return detector(x, rescale=False, resize=False, return_features=True).double().numpy()


def _common_metrics_videogpt(net, frames: list) -> np.ndarray:
    """common_metrics_on_video_quality's calculate_fvd(method='videogpt', only_final=True) on a video
    cut to its first 16 frames: the [0, 1] frames (uint8 / 255) times 255 truncated to uint8, as its
    preprocess does (so float rounding can take a level off), / 255, the shorter side to 224 and the
    centre crop, - 0.5, * 2, then the InceptionI3d's logits (i3d_videogpt)."""
    import torch

    clip = _first_clip(frames)
    if clip is None:
        return np.zeros((0, FEATURES))
    levels = (torch.from_numpy(clip).float() / 255.0 * 255).numpy().astype(np.uint8)  # (T, H, W, 3)
    video = (torch.from_numpy(levels).float() / 255.0).permute(3, 0, 1, 2)  # (C, T, H, W)
    x = ((shorter_side_crop(video) - 0.5) * 2)[None]
    with torch.no_grad():
        return net(x, return_features=True).double().numpy()


CD_FVD_RESOLUTION = 256  # cdfvd.load_videos' default


def _cd_fvd_i3d(net, frames: list) -> np.ndarray:
    """cd-fvd 0.1.1's FVD with model='i3d' on load_videos(folder) at its defaults (fvd.py,
    utils/data_utils.py, third_party/i3d/utils.py): a 16-frame clip (ours the first; see the
    variant's description), in [0, 1], the shorter side scaled to 256 (antialiased bilinear) and the
    centre crop, x 255 truncated to uint8 (its `.byte()`), bilinear to 224x224 (no antialias, a
    square already), 2 x / 255 - 1, then the InceptionI3d's logits (eps 1e-5, a 2x7x7 pool: the
    network of the videogpt method)."""
    import torch
    import torch.nn.functional as F

    levels = _cd_fvd_levels(frames)
    if levels is None:
        return np.zeros((0, FEATURES))
    x = F.interpolate(levels, size=(224, 224), mode="bilinear", align_corners=False)
    x = (2.0 * x / 255.0 - 1).transpose(0, 1)[None]  # (1, C, T, 224, 224)
    with torch.no_grad():
        return net(x, return_features=True).double().numpy()


def _cd_fvd_levels(frames: list):
    """cd-fvd's clip as its loader and compute_*_stats make it (ours the first 16 frames): in [0, 1],
    the shorter side scaled to 256 (antialiased bilinear) and the centre crop, x 255 truncated to
    uint8; (T, C, 256, 256) float levels, or None when the video is shorter than a clip."""
    import torch

    clip = _first_clip(frames)
    if clip is None:
        return None
    video = torch.from_numpy(clip).permute(0, 3, 1, 2).float() / 255.0  # (T, C, H, W) in [0, 1]
    return (shorter_side_crop(video, CD_FVD_RESOLUTION, antialias=True) * 255).byte().float()


def _cd_fvd_videomae(net, frames: list) -> np.ndarray:
    """cd-fvd 0.1.1's FVD with model='videomae' (fvd.py get_videomae_features,
    third_party/VideoMAEv2/utils.py preprocess_videomae): its uint8 clip (_cd_fvd_levels) / 255,
    bilinear to 224x224 (no antialias), then VideoMAE v2 ViT-g's forward_features: 1,408 values."""
    import torch.nn.functional as F

    from theval_mesh.backends.classic import videomae

    levels = _cd_fvd_levels(frames)
    if levels is None:
        return np.zeros((0, videomae.FEATURES))
    x = F.interpolate(levels / 255, size=(224, 224), mode="bilinear", align_corners=False)
    return videomae.features(net, x.transpose(0, 1)[None])  # (1, C, T, 224, 224)


def _load_videomae(store=None):
    from theval_mesh.backends.classic import videomae

    return videomae.load(store)


def _cd_fvd_distance(generated: np.ndarray, gt: np.ndarray) -> float:
    """cd-fvd's compute_fvd_from_stats: FeatureStats' moments, sqrtm(S_real S_fake), the real part."""
    return frechet_distance_stats(*feature_stats_moments(gt), *feature_stats_moments(generated),
                                  imaginary_atol=None)


# DisCo's FVD takes a whole video as one I3D input: its activations grow with its length (about
# 5 MB a frame at 224 px), so longer videos give no row (counted as skipped, as short ones are).
WHOLE_VIDEO_FRAMES = (1, 750)


def _disco(net, frames: Iterable) -> np.ndarray:
    """DisCo's FVD-3DInception (tool/metrics/utils.py DatasetFVDVideoResize, metric_center.py
    compute_3d_video_prediction): every frame resized to 224x224 by its copy of clean-fid's float
    PIL bicubic (the whole frame, no crop, no clip), / 127.5 - 1, the whole video as one clip into
    its copy of piergiaj/pytorch-i3d's InceptionI3d (BatchNorm eps 1e-3, a 1x7x7 final pool): its
    logits averaged over time, one row a video."""
    import torch

    from theval_mesh.backends.classic.fid import pil_bicubic

    low, high = WHOLE_VIDEO_FRAMES
    frames = list(itertools.islice(frames, high + 1))  # read no further than the limit
    if not low <= len(frames) <= high:
        return np.zeros((0, FEATURES))
    video = torch.from_numpy(np.stack([pil_bicubic(f, 224, clip=False) for f in frames])) / 127.5 - 1
    with torch.no_grad():
        return net(video.permute(3, 0, 1, 2)[None], return_features=True).double().numpy()


def frechet_distance_tf_gan(first: np.ndarray, second: np.ndarray, eps: float = 1e-10) -> float:
    """The Fréchet distance as common_metrics' videogpt method computes it (TF-GAN's formula) in
    float32 torch: unbiased covariances, tr sqrt(S1 S2) as tr sqrt(sqrt(S1) S2 sqrt(S1)), each square
    root through an SVD whose singular values below eps are kept unrooted. On a singular covariance
    (fewer clips than 400) the float32 rounding of its zero singular values (about 1e-7, above eps)
    is rooted too: a floor under the value that the other variants do not have. One row a side:
    the means' term alone."""
    import torch

    x1, x2 = (torch.from_numpy(np.asarray(f, np.float32)) for f in (first, second))
    means = torch.sum((x1.mean(0) - x2.mean(0)) ** 2)
    if len(x1) < 2:
        return float(means)

    def cov(x):
        centred = (x - x.mean(0)).t()
        return (1.0 / (len(x) - 1)) * centred.matmul(centred.t())

    def sqrt_psd(mat):
        u, s, v = torch.svd(mat)
        return u.matmul(torch.diag(torch.where(s < eps, s, torch.sqrt(s)))).matmul(v.t())

    s1, s2 = cov(x1), cov(x2)
    root = sqrt_psd(s1)
    return float(torch.trace(s1 + s2) - 2.0 * torch.trace(sqrt_psd(root.matmul(s2.matmul(root)))) + means)


def _load_videogpt(store=None):
    from theval_mesh.backends.classic import i3d_videogpt

    return i3d_videogpt.load(store)


def _load_disco(store=None):
    from theval_mesh.backends.classic import i3d_videogpt

    return i3d_videogpt.load(store, eps=1e-3, time_pool=1)


def _disco_distance(generated: np.ndarray, gt: np.ndarray) -> float:
    """DisCo's fid_from_feats(generated, gt): its features are float32 and np.mean keeps that (the
    means' term in float32: 4e-7 relative on the parity clips), np.cov's unbiased covariances in
    float64, pytorch-fid's frechet_distance (eps on a singular product, ValueError on a large
    imaginary part)."""
    g, t = (np.asarray(x, np.float32) for x in (generated, gt))
    return frechet_distance_stats(g.mean(0), np.cov(g, rowvar=False), t.mean(0), np.cov(t, rowvar=False))


def _real_first(distance: Callable) -> Callable:
    """common_metrics computes frechet_distance(feats of its first argument, of its second), and its
    README passes the original videos first: (generated, gt) -> distance(gt, generated)."""
    return lambda generated, gt: distance(gt, generated)


@dataclass(frozen=True)
class FvdVariant:
    """One implementation of FVD that papers report under that name (as fid.FidVariant): the code it
    follows, the detector file, what a video becomes ((clips, dims) features: I3D's 400 logits,
    VideoMAE's 1,408) and the distance of two feature sets, (generated, GT) -> FVD, with its
    covariance's ddof (for the interval)."""
    name: str
    follows: str
    network: str
    what: str
    features: Callable = field(repr=False)  # (detector, frames) -> (clips, dims) float64
    ddof: int = 0
    distance: Callable = field(default=fvd, repr=False)
    load: Callable = field(default=load_detector, repr=False)


def _unbiased(a: np.ndarray, b: np.ndarray) -> float:
    """np.cov's unbiased covariances, scipy's sqrtm, the real part: common_metrics' frechet_distance."""
    return frechet_distance_stats(*gaussian_stats(a), *gaussian_stats(b), imaginary_atol=None)


COMMON_METRICS = "JunyaoHu/common_metrics_on_video_quality (5f75173)"
VARIANTS = {v.name: v for v in (
    FvdVariant("stylegan-v", "universome/stylegan-v (3fecd69) src/metrics/frechet_video_distance.py", NAME,
               "StyleGAN-V's I3D call (rescale and resize inside the detector), every non-overlapping 16-frame "
               "clip from frame 0, biased covariance", _stylegan_v),
    FvdVariant("common-metrics-styleganv", f"{COMMON_METRICS} calculate_fvd(method='styleganv', only_final=True)",
               NAME, "each video's first 16 frames as one clip, in [0, 1]: the shorter side resized to 224 "
               "bilinear and centre-cropped, (x - 0.5) * 2, the detector's rescale and resize off; unbiased "
               "covariance", _common_metrics_styleganv, ddof=1, distance=_real_first(_unbiased)),
    FvdVariant("common-metrics-videogpt", f"{COMMON_METRICS} calculate_fvd(method='videogpt', only_final=True)",
               "fvd-i3d-videogpt", "each video's first 16 frames as one clip, requantised to uint8 (x * 255 "
               "truncated), the shorter side resized to 224 bilinear and centre-cropped, [-1, 1], piergiaj/"
               "pytorch-i3d's InceptionI3d logits; unbiased covariance, TF-GAN's SVD square roots in float32",
               _common_metrics_videogpt, ddof=1, distance=_real_first(frechet_distance_tf_gan),
               load=_load_videogpt),
    FvdVariant("disco", "Wangt-CN/DisCo (c4fa48a) tool/metrics/metric_center.py FVD-3DInception",
               "fvd-i3d-videogpt", "each whole video as one clip (up to 750 frames), every frame resized to "
               "224x224 (PIL bicubic in float, no crop), [-1, 1], its InceptionI3d's logits (BatchNorm eps 1e-3, a "
               "1x7x7 final pool) averaged over time: one row a video; unbiased covariance, pytorch-fid's "
               "distance", _disco, ddof=1, distance=_disco_distance, load=_load_disco),
    FvdVariant("cd-fvd-i3d", "songweige/content-debiased-fvd (PyPI cd-fvd 0.1.1) fvd.cdfvd('i3d', n_real='full', "
               "n_fake='full') on load_videos(folder) at its defaults", "fvd-i3d-videogpt",
               "each video's first 16 frames as one clip (cd-fvd draws the clip's start at random in its data "
               "loader), the shorter side resized to 256 (antialiased bilinear) and centre-cropped, requantised "
               "to uint8, resized to 224 bilinear, [-1, 1], piergiaj/pytorch-i3d's InceptionI3d logits; biased "
               "covariance (StyleGAN-V's FeatureStats)", _cd_fvd_i3d, distance=_cd_fvd_distance,
               load=_load_videogpt),
    FvdVariant("cd-fvd-videomae", "songweige/content-debiased-fvd (PyPI cd-fvd 0.1.1) fvd.cdfvd('videomae', "
               "n_real='full', n_fake='full') on load_videos(folder) at its defaults", "fvd-videomae",
               "the content-debiased FVD: each video's first 16 frames as one clip, prepared as cd-fvd-i3d's "
               "up to uint8, then / 255 and resized to 224 bilinear, VideoMAE v2 ViT-g's 1,408 mean-pooled "
               "features (fine-tuned on SSv2); biased covariance (StyleGAN-V's FeatureStats)", _cd_fvd_videomae,
               distance=_cd_fvd_distance, load=_load_videomae),
)}
DEFAULT_VARIANT = "stylegan-v"
