"""Training-free stand-in for the quality models when their weights are absent.

    q = 100 * (1 - blur) / (1 + sigma / 10)        higher = better, range [0, 100]

on the BT.601 luma Y (0..255) of the same frame or padded crop the model would have scored,
first scaled down (area averaging) so that its longer side is at most 256 px:
  blur   Crete et al. 2007 "blur effect" (identical to skimage.measure.blur_effect, h_size=11):
         per axis, the share of Sobel gradient that survives an 11-px box re-blur, max over axes;
         0 = sharp, 1 = flat. Alone it IMPROVES under noise, hence the second term.
  sigma  noise sigma in grey levels, a robust Immerkaer (1996) estimate: 1.4826 * median|Y * M| / 6
         with M = [1 -2 1] x [1 -2 1] (blind to linear ramps), over pixels with a non-zero
         response (exactly flat areas, e.g. the black padding canvas, carry no evidence). The
         median keeps edges from counting as noise. sigma = 10 halves the score.

Why not 100 - PIQE alone: on a 256x256 astronaut frame PIQE rates noise (sigma 20/255) BETTER than
the clean frame (43.5 vs 52.5, lower = better) and it costs ~13 ms; this proxy is ~5 ms.
Why 256 px (v2; v1 scored full resolution): a 512x512 frame cost ~20 ms, more than all the
FaceMesh passes of a frame together; the quality models themselves score at 224-512 px.
Its scale is its own: never compare it with topiq_iaa / musiq / topiq_nr-face values.
"""
import cv2
import numpy as np

NAME = "proxy:sharpness-noise-v2"
DEFINITION = ("100*(1-blur)/(1+sigma/10) on BT.601 luma of the image scaled down to at most 256 px "
              "(area): blur = Crete 2007 blur effect (skimage blur_effect, h_size=11), sigma = "
              "robust Immerkaer noise sigma (grey levels)")
MAX_SIDE = 256
REBLUR = 11
SIGMA_HALF = 10.0
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)
_SECOND_DIFF = np.array([1.0, -2.0, 1.0], np.float32)
# OpenCV's filters with scipy.ndimage's default border (reflect: d c b a | a b c d), ~3x faster.
_BORDER = cv2.BORDER_REFLECT
_ALONG = {0: (1, REBLUR), 1: (REBLUR, 1)}  # cv2 box size (width, height) that blurs along an axis


def _sobel(y: np.ndarray, axis: int) -> np.ndarray:
    """ndimage.sobel(y, axis): derivative along `axis`, [1 2 1] smoothing across it."""
    return cv2.Sobel(y, cv2.CV_32F, axis, 1 - axis, ksize=3, borderType=_BORDER)


def luma(image: np.ndarray) -> np.ndarray:
    """Per pixel, with element-wise operations: a matrix product goes through BLAS, whose kernel
    (CPU type, thread count) changes the last bit of some pixels, and with it which pixels are
    exactly flat for noise_sigma: the same frame scored differently on two machines."""
    rgb = image.astype(np.float32)
    return rgb[..., 0] * _LUMA[0] + rgb[..., 1] * _LUMA[1] + rgb[..., 2] * _LUMA[2]


def blur_effect(y: np.ndarray) -> float:
    inner = tuple(slice(2, s - 1) for s in y.shape)
    worst = 0.0
    for axis in (0, 1):
        sharp = np.abs(_sobel(y, axis))
        reblurred = np.abs(_sobel(cv2.blur(y, _ALONG[axis], borderType=_BORDER), axis))
        m1 = float(sharp[inner].sum())
        if m1 <= 0.0:
            return 1.0  # no gradient at all: as blurred as it gets
        m2 = float(np.maximum(sharp - reblurred, 0.0)[inner].sum())
        worst = max(worst, abs(m1 - m2) / m1)
    return worst


def noise_sigma(y: np.ndarray) -> float:
    r = cv2.sepFilter2D(y, cv2.CV_32F, _SECOND_DIFF, _SECOND_DIFF, borderType=_BORDER)
    r = np.abs(r[1:-1, 1:-1])
    r = r[r > 0]
    return float(1.4826 * np.median(r) / 6.0) if r.size else 0.0


def scaled(image: np.ndarray) -> np.ndarray:
    """The image as the proxy sees it: longer side at most MAX_SIDE px (area averaging)."""
    h, w = image.shape[:2]
    if max(h, w) <= MAX_SIDE:
        return image
    f = MAX_SIDE / max(h, w)
    return cv2.resize(image, (max(1, round(w * f)), max(1, round(h * f))), interpolation=cv2.INTER_AREA)


def score(image: np.ndarray) -> float:
    """Proxy quality of one RGB uint8 image (H x W x 3)."""
    y = luma(scaled(image))
    return 100.0 * (1.0 - blur_effect(y)) / (1.0 + noise_sigma(y) / SIGMA_HALF)
