"""Band-limited resampling as torchaudio.transforms.Resample does it with its defaults.

The reference reads audio for Silero with silero-vad 5.1.2's `read_audio`, which, without libsox
(the reference environment had none), loads the file with torchaudio and resamples it to 16 kHz
with `torchaudio.transforms.Resample(orig, 16000)`: a windowed-sinc filter (Hann window, 6 zero
crossings, roll-off 0.99) computed in float64, cast to float32 and applied as a strided
convolution in float32. The VAD's speech probabilities, hence the speech segments, depend on those
samples, so `reference` resamples the same way. This is that filter in numpy (no torch: its import
cost a second of every run): the same float32 taps, the convolution as float32 products of blocks
of input against them, equal to torch's to float32 rounding (a test compares both, and the
segments they give on the parity clips).
"""
import math

import numpy as np

ZERO_CROSSINGS = 6
ROLLOFF = 0.99
BLOCK = 1 << 14  # output steps per product: bounds the strided copy (a 48 kHz hour: 41 taps x 16k)


def kernel(orig: int, new: int) -> tuple[np.ndarray, int]:
    """(new, taps) float32 filters, one per output phase, and the half-width in input samples.
    Each step as torchaudio takes it (its phases are float32, everything else float64)."""
    cutoff = min(orig, new) * ROLLOFF
    width = math.ceil(ZERO_CROSSINGS * orig / cutoff)
    taps = np.arange(-width, width + orig, dtype=np.float64)[None] / orig
    phase = (np.arange(0, -new, -1, dtype=np.float32) / np.float32(new))[:, None]
    t = np.clip((phase + taps) * cutoff, -ZERO_CROSSINGS, ZERO_CROSSINGS)
    window = np.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    with np.errstate(invalid="ignore", divide="ignore"):
        sinc = np.where(t == 0, 1.0, np.sin(t) / t)
    return (sinc * window * (cutoff / orig)).astype(np.float32), width


def resample(samples: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """1-D float samples at orig_rate -> float32 at new_rate, ceil(n * new / orig) samples."""
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if orig_rate == new_rate or len(x) == 0:
        return x
    g = math.gcd(int(orig_rate), int(new_rate))
    orig, new = int(orig_rate) // g, int(new_rate) // g
    filters, width = kernel(orig, new)
    wave = np.pad(x, (width, width + orig))
    n_taps = filters.shape[1]
    steps = (len(wave) - n_taps) // orig + 1
    frames = np.lib.stride_tricks.sliding_window_view(wave, n_taps)[::orig][:steps]
    out = np.empty((steps, new), np.float32)  # step-major: the output's order
    for at in range(0, steps, BLOCK):
        np.matmul(np.ascontiguousarray(frames[at:at + BLOCK]), filters.T, out=out[at:at + BLOCK])  # BLAS wants it contiguous
    return out.reshape(-1)[:math.ceil(new * len(x) / orig)].copy()
