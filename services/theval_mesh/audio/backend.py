"""Audio backend: loudness envelope in-process, Silero VAD (the ONNX model shipped in the
silero-vad wheel, on onnxruntime) in-process or on a Triton server.

Silero's get_speech_timestamps is split in two: the model's speech probability per 512-sample
window (speech_probabilities, run where the model lives) and silero's own thresholding of those
probabilities (get_speech_timestamps_from_probs, always here). Both paths therefore give the
same segments for the same probabilities.
"""
import importlib.metadata
import os
import threading

import numpy as np
import silero_vad
import torch
from silero_vad.utils_vad import OnnxWrapper, get_speech_timestamps_from_probs

from ..common.checksum import sha256_file
from ..media.decode import Audio
from ..metrics.loudness import rms_envelope
from .series import AudioSeries

MODEL_FILE = os.path.join(os.path.dirname(silero_vad.__file__), "data", "silero_vad.onnx")
VAD_RATE = 16000
WINDOW = 512  # samples per VAD window at 16 kHz (silero's fixed size)


def vad_provenance() -> str:
    version = importlib.metadata.version("silero-vad")
    return f"silero-vad {version} onnx sha256:{sha256_file(MODEL_FILE)[:16]}"


def load_vad_model() -> OnnxWrapper:
    return OnnxWrapper(MODEL_FILE, force_onnx_cpu=True)


def speech_probabilities(model: OnnxWrapper, waves: list[np.ndarray]) -> list[np.ndarray]:
    """Silero's speech probability for each 512-sample window of each 16 kHz wave, exactly as
    get_speech_timestamps computes them (state reset first, last window zero-padded).

    Several waves run as one batch: each is zero-padded to the longest. The model is causal, so
    padding after a wave's end changes none of its windows (a test checks the batch against
    waves run alone)."""
    if not waves:
        return []
    counts = [-(-len(w) // WINDOW) for w in waves]
    batch = np.zeros((len(waves), max(counts) * WINDOW), np.float32)
    for row, w in zip(batch, waves):
        row[:len(w)] = w
    x = torch.from_numpy(batch)
    model.reset_states()
    probs = np.empty((len(waves), max(counts)), np.float32)
    for k in range(max(counts)):
        probs[:, k] = model(x[:, k * WINDOW:(k + 1) * WINDOW], VAD_RATE).numpy().reshape(-1)
    return [probs[i, :n].copy() for i, n in enumerate(counts)]


def segments_from_probabilities(probs: np.ndarray, n_samples: int) -> list[tuple[float, float]]:
    """Speech segments in seconds by silero's own rule with its defaults (as the reference).

    return_seconds=True rounds to 0.1 s (silero's default time_resolution), as the reference
    scripts did."""
    if n_samples == 0:
        return []
    stamps = get_speech_timestamps_from_probs([float(p) for p in probs], sampling_rate=VAD_RATE,
                                              return_seconds=True, audio_length_samples=n_samples)
    return [(float(s["start"]), float(s["end"])) for s in stamps]


class LocalVad:
    """Silero VAD in this process. Its ONNX wrapper keeps state between windows: one call at a time."""
    served_by = "in-process"

    def __init__(self):
        self._model = load_vad_model()
        self._lock = threading.Lock()

    def probabilities(self, waves: list[np.ndarray]) -> list[np.ndarray]:
        with self._lock:
            return speech_probabilities(self._model, waves)

    def provenance(self) -> str:
        return vad_provenance()


class AudioBackend:
    """vad: LocalVad (default) or triton.client.TritonVad (same interface)."""

    def __init__(self, vad=None):
        self.vad = vad or LocalVad()

    def provenance(self) -> str:
        return self.vad.provenance()

    def speech_segments(self, samples_16k: np.ndarray) -> list[tuple[float, float]]:
        """Speech segments in seconds (get_speech_timestamps with its defaults)."""
        if len(samples_16k) == 0:
            return []
        probs = self.vad.probabilities([np.ascontiguousarray(samples_16k, dtype=np.float32)])[0]
        return segments_from_probabilities(probs, len(samples_16k))

    def analyse(self, audio: Audio):
        """The audio stage: loudness envelope at the native rate and VAD speech segments."""
        rms, times = rms_envelope(audio.samples, audio.rate)
        return AudioSeries(rms, times, self.speech_segments(audio.at_vad_rate()))
