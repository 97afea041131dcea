"""Audio backend: Silero VAD (the ONNX model shipped in the silero-vad wheel, on onnxruntime)."""
import importlib.metadata
import os

import numpy as np
import silero_vad
import torch
from silero_vad.utils_vad import OnnxWrapper, get_speech_timestamps

from ..common.checksum import sha256_file
from ..media.decode import Audio
from .series import AudioSeries
from ..metrics.loudness import rms_envelope

MODEL_FILE = os.path.join(os.path.dirname(silero_vad.__file__), "data", "silero_vad.onnx")
VAD_RATE = 16000


class AudioBackend:
    def __init__(self):
        self._model = OnnxWrapper(MODEL_FILE, force_onnx_cpu=True)

    @staticmethod
    def provenance() -> str:
        version = importlib.metadata.version("silero-vad")
        return f"silero-vad {version} onnx sha256:{sha256_file(MODEL_FILE)[:16]}"

    def speech_segments(self, samples_16k: np.ndarray) -> list[tuple[float, float]]:
        """Speech segments in seconds, get_speech_timestamps with its defaults (as the reference).

        return_seconds=True rounds to 0.1 s (silero's default time_resolution), as the
        reference scripts did.
        """
        if len(samples_16k) == 0:
            return []
        wav = torch.from_numpy(np.ascontiguousarray(samples_16k, dtype=np.float32))
        stamps = get_speech_timestamps(wav, self._model, sampling_rate=VAD_RATE, return_seconds=True)
        return [(float(s["start"]), float(s["end"])) for s in stamps]

    def analyse(self, audio: Audio):
        """The audio stage: loudness envelope at the native rate and VAD speech segments."""
        rms, times = rms_envelope(audio.samples, audio.rate)
        return AudioSeries(rms, times, self.speech_segments(audio.at_vad_rate()))
