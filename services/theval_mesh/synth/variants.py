"""Degraded variants of a GT clip: which driving signal, audio or pixel filter each one changes.

Each variant is built to move (mainly) one metric in a known direction.
"""
from collections.abc import Callable
from dataclasses import dataclass, replace

import cv2
import numpy as np

from theval_mesh.synth import motion
from theval_mesh.synth.speech import delay_audio

GT = "gt"
ALL_VARIANTS = ("static_head", "audio_shift", "frozen_mouth", "silent_mouth", "blur", "noise",
                "exaggerated_mouth", "still_brows")
DESCRIPTIONS = {
    GT: "ground truth: mouth from the audio envelope, head roll/translation, brow raises",
    "static_head": "no head roll or translation",
    "audio_shift": "audio delayed by 0.4 s (same video, same duration)",
    "frozen_mouth": "mouth never opens",
    "silent_mouth": "mouth also moves (chewing-like) during silences",
    "blur": "Gaussian blur (sigma 2.5 px at 256 px)",
    "noise": "additive Gaussian noise (sigma 20/255), seeded",
    "exaggerated_mouth": "mouth opening x2.5",
    "still_brows": "no eyebrow raises",
}
# variants whose pixels come from the GT rendering (one rendering feeds all their encoders)
SAME_MOTION_AS_GT = ("audio_shift", "blur", "noise")
AUDIO_DELAY_S = 0.4
BLUR_SIGMA_256 = 2.5
NOISE_SIGMA = 20.0
EXAGGERATION = 2.5


@dataclass(frozen=True)
class ClipSignals:
    """What drives one clip, per frame (pixels of the rendered frame, degrees for roll)."""
    mouth_open: np.ndarray
    roll_deg: np.ndarray
    tx: np.ndarray
    ty: np.ndarray
    brow_raise: np.ndarray
    audio: np.ndarray            # mono float32
    speech_segments: tuple       # ((start_s, end_s), ...) in the clip's audio track


def variant_signals(name: str, gt: ClipSignals, rng: np.random.Generator, fps: float,
                    mouth_max_px: float) -> ClipSignals:
    """The GT signals as changed by variant `name` (rng and mouth_max_px: silent_mouth only)."""
    n = len(gt.mouth_open)
    zero = np.zeros(n)
    if name in (GT, "blur", "noise"):
        return gt
    if name == "static_head":
        return replace(gt, roll_deg=zero, tx=zero, ty=zero)
    if name == "audio_shift":
        segs = tuple((s + AUDIO_DELAY_S, min(e + AUDIO_DELAY_S, n / fps))
                     for s, e in gt.speech_segments if s + AUDIO_DELAY_S < n / fps)
        return replace(gt, audio=delay_audio(gt.audio, AUDIO_DELAY_S), speech_segments=segs)
    if name == "frozen_mouth":
        return replace(gt, mouth_open=zero)
    if name == "silent_mouth":
        speaking = motion.speech_mask(gt.speech_segments, n, fps)
        chew = motion.chewing(rng, n, fps, mouth_max_px, speaking)
        return replace(gt, mouth_open=np.maximum(gt.mouth_open, chew))
    if name == "exaggerated_mouth":
        return replace(gt, mouth_open=gt.mouth_open * EXAGGERATION)
    if name == "still_brows":
        return replace(gt, brow_raise=zero)
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(ALL_VARIANTS)}")


def pixel_filter(name: str, size: int, rng: np.random.Generator) -> Callable | None:
    """Per-frame filter for the image-quality variants, else None."""
    if name == "blur":
        sigma = BLUR_SIGMA_256 * size / 256
        return lambda f: cv2.GaussianBlur(f, (0, 0), sigmaX=sigma, sigmaY=sigma)
    if name == "noise":
        # iid Gaussian field twice the frame size, a random window of it per frame: the same
        # per-pixel statistics as fresh noise every frame, at a fraction of the cost
        field = rng.standard_normal((2 * size, 2 * size, 3), dtype=np.float32) * NOISE_SIGMA + 0.5

        def add_noise(f):
            oy, ox = rng.integers(0, size, 2)
            return np.clip(f + field[oy:oy + size, ox:ox + size], 0, 255).astype(np.uint8)
        return add_noise
    return None
