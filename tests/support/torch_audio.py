"""Oracles on torch for the torch-free audio path (the product no longer imports torch for it).

- `torch_resample`: torchaudio.transforms.Resample's defaults written with torch ops, as the
  product computed it before its numpy rewrite (torchaudio itself has no release for the pinned
  torch): float64 windowed sinc, float32 phases and taps, torch's conv1d in float32.
- `JitVad`: silero-vad 5.1.2's JIT model (what the reference's `load_silero_vad()` loads) behind
  the window() interface of backends.audio.silero_onnx.SileroOnnx.
- `WrapperVad`: silero-vad's own OnnxWrapper on the same ONNX file, behind the same interface.
"""
import math

import numpy as np
import torch


def torch_kernel(orig: int, new: int) -> tuple[torch.Tensor, int]:
    """(new, 1, taps) float32 filters and the half-width, as torchaudio computes them."""
    cutoff = min(orig, new) * 0.99
    width = math.ceil(6 * orig / cutoff)
    taps = torch.arange(-width, width + orig, dtype=torch.float64)[None, None] / orig
    phase = torch.arange(0, -new, -1, dtype=torch.float32)[:, None, None] / new
    t = ((phase + taps) * cutoff).clamp_(-6, 6)
    window = torch.cos(t * math.pi / 6 / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.tensor(1.0, dtype=t.dtype), t.sin() / t)
    return (sinc * window * (cutoff / orig)).to(torch.float32), width


def torch_resample(samples: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if orig_rate == new_rate or len(x) == 0:
        return x
    g = math.gcd(int(orig_rate), int(new_rate))
    orig, new = int(orig_rate) // g, int(new_rate) // g
    kernel, width = torch_kernel(orig, new)
    wave = torch.nn.functional.pad(torch.from_numpy(x)[None, None], (width, width + orig))
    out = torch.nn.functional.conv1d(wave, kernel, stride=orig).transpose(1, 2).reshape(-1)
    return out[:math.ceil(new * len(x) / orig)].numpy().copy()


class _TorchModel:
    def __init__(self, model):
        self.model = model

    def reset_states(self):
        self.model.reset_states()

    def window(self, chunk: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.model(torch.from_numpy(np.ascontiguousarray(chunk, np.float32)), 16000).numpy().reshape(-1)


class JitVad(_TorchModel):
    def __init__(self):
        from theval_mesh.backends.audio.model import JIT_FILE
        super().__init__(torch.jit.load(JIT_FILE, map_location="cpu").eval())


class WrapperVad(_TorchModel):
    def __init__(self):
        threads = torch.get_num_threads()  # silero's package import sets torch's threads to 1
        from silero_vad.utils_vad import OnnxWrapper

        from theval_mesh.backends.audio.model import MODEL_FILE
        torch.set_num_threads(threads)
        super().__init__(OnnxWrapper(MODEL_FILE, force_onnx_cpu=True))
