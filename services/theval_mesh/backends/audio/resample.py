"""Band-limited resampling as torchaudio.transforms.Resample does it with its defaults.

The reference reads audio for Silero with silero-vad 5.1.2's `read_audio`, which, without libsox
(the reference environment had none), loads the file with torchaudio and resamples it to 16 kHz
with `torchaudio.transforms.Resample(orig, 16000)`: a windowed-sinc filter (Hann window, 6 zero
crossings, roll-off 0.99) computed in float64, cached as float32 and applied as a strided
convolution in float32. The VAD's speech probabilities, hence the speech segments, depend on those
samples, so `reference` resamples the same way. torchaudio itself is not installed (it has no
release for the torch this project pins); this is the same filter written with torch.
"""
import math

import numpy as np
import torch

ZERO_CROSSINGS = 6
ROLLOFF = 0.99


def _kernel(orig: int, new: int) -> tuple[torch.Tensor, int]:
    """(new, 1, taps) float32 filters, one per output phase, and the half-width in input samples."""
    cutoff = min(orig, new) * ROLLOFF
    width = math.ceil(ZERO_CROSSINGS * orig / cutoff)
    taps = torch.arange(-width, width + orig, dtype=torch.float64)[None, None] / orig
    phase = torch.arange(0, -new, -1, dtype=torch.float32)[:, None, None] / new
    t = ((phase + taps) * cutoff).clamp_(-ZERO_CROSSINGS, ZERO_CROSSINGS)
    window = torch.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.tensor(1.0, dtype=t.dtype), t.sin() / t)
    return (sinc * window * (cutoff / orig)).to(torch.float32), width


def resample(samples: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """1-D float samples at orig_rate -> float32 at new_rate, ceil(n * new / orig) samples."""
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if orig_rate == new_rate or len(x) == 0:
        return x
    g = math.gcd(int(orig_rate), int(new_rate))
    orig, new = int(orig_rate) // g, int(new_rate) // g
    kernel, width = _kernel(orig, new)
    wave = torch.nn.functional.pad(torch.from_numpy(x)[None, None], (width, width + orig))
    out = torch.nn.functional.conv1d(wave, kernel, stride=orig)  # (1, new, steps)
    out = out.transpose(1, 2).reshape(-1)
    return out[:math.ceil(new * len(x) / orig)].numpy().copy()
