"""Per-frame driving signals: mouth opening from the audio, head roll/translation, brow raises.

All lengths are in pixels of the rendered frame. Head shifts scale with the frame; mouth and
brow amplitudes with the face (FACE_* are fractions of the face's landmark-box width).
"""
import itertools

import numpy as np
from scipy.ndimage import gaussian_filter1d

ROLL_MAX_DEG = 8.0
SHIFT_MAX_FRAC = 6.0 / 256     # +-6 px at 256
FACE_MOUTH_MAX = 0.10         # lip gap at full voice: ~30 % of the lips-to-chin height
FACE_BROW_MAX = 0.05          # brow raise at its highest


def smooth_wander(rng: np.random.Generator, n: int, fps: float, peak: float,
                  freqs=(0.12, 0.7), n_waves: int = 3) -> np.ndarray:
    """Sum of a few low-frequency sinusoids rescaled so that max |value| is in [0.7, 1] * peak."""
    t = np.arange(n) / fps
    f = rng.uniform(*freqs, size=n_waves)
    phase = rng.uniform(0, 2 * np.pi, size=n_waves)
    amp = rng.uniform(0.5, 1.0, size=n_waves)
    x = (amp[:, None] * np.sin(2 * np.pi * f[:, None] * t + phase[:, None])).sum(0)
    return x / (np.abs(x).max() + 1e-12) * peak * rng.uniform(0.7, 1.0)


def head_motion(rng, n: int, fps: float, size: int):
    """(roll degrees, tx px, ty px) per frame."""
    shift = SHIFT_MAX_FRAC * size
    return (smooth_wander(rng, n, fps, ROLL_MAX_DEG), smooth_wander(rng, n, fps, shift),
            smooth_wander(rng, n, fps, shift))


def brow_raises(rng, n: int, fps: float, max_px: float) -> np.ndarray:
    """A few raised-cosine raise events (0.6-1.2 s long), one per ~2 s slice of the clip."""
    duration = n / fps
    n_events = max(1, int(round(duration / 2.0)))
    t = np.arange(n) / fps
    out = np.zeros(n)
    bounds = np.linspace(0, duration, n_events + 1)
    for lo, hi in itertools.pairwise(bounds):
        length = min(rng.uniform(0.6, 1.2), hi - lo)
        start = rng.uniform(lo, hi - length)
        u = np.clip((t - start) / length, 0, 1)
        out += rng.uniform(0.7, 1.0) * 0.5 * (1 - np.cos(2 * np.pi * u))
    return np.clip(out, 0, 1) * max_px


def frame_rms(audio: np.ndarray, rate: int, n: int, fps: float, window_s: float = 0.08):
    """RMS of the audio in a window centred on each frame time."""
    c = np.concatenate([[0.0], np.cumsum(audio.astype(np.float64) ** 2)])
    centres = np.arange(n) / fps * rate
    half = window_s * rate / 2
    lo = np.clip(np.round(centres - half).astype(int), 0, len(audio))
    hi = np.clip(np.round(centres + half).astype(int), 0, len(audio))
    return np.sqrt((c[hi] - c[lo]) / np.maximum(hi - lo, 1))


def mouth_from_audio(audio, rate, n, fps, max_px: float) -> np.ndarray:
    """Lip gap (px) driven by the smoothed RMS envelope; exactly 0 in digital silence."""
    rms = frame_rms(audio, rate, n, fps)
    ref = np.percentile(rms[rms > 0], 95) if np.any(rms > 0) else 1.0
    level = np.clip(rms / ref, 0, 1) ** 0.7  # compress: quiet syllables still open the mouth
    level = gaussian_filter1d(level, sigma=0.8, mode="nearest")
    level[level < 0.02] = 0.0  # the smoothing tails: closed, not 0.01 px open
    return level * max_px


def chewing(rng, n: int, fps: float, max_px: float, speech_mask: np.ndarray) -> np.ndarray:
    """Chewing-like opening in silent frames (speech-like amplitude), 0 during speech."""
    t = np.arange(n) / fps
    freq = rng.uniform(1.5, 2.5)
    wave = 0.5 * (1 - np.cos(2 * np.pi * freq * t + rng.uniform(0, 2 * np.pi)))
    envelope = 0.75 + 0.25 * smooth_wander(rng, n, fps, 1.0, freqs=(0.2, 0.6), n_waves=2)
    # fade in/out over a few frames away from speech so the switch is smooth
    silent = gaussian_filter1d((~speech_mask).astype(float), sigma=1.5, mode="nearest")
    silent = np.where(speech_mask, 0.0, silent)
    return wave * envelope * silent * max_px


def speech_mask(segments, n: int, fps: float, margin_frames: int = 1) -> np.ndarray:
    """Frames touched by a speech segment (plus a margin)."""
    mask = np.zeros(n, bool)
    for s, e in segments:
        mask[max(0, int(s * fps) - margin_frames):min(n, int(e * fps) + 1 + margin_frames)] = True
    return mask
