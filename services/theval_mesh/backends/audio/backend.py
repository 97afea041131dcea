"""Audio backend: loudness envelope in-process, Silero VAD in-process or on a Triton server.

The VAD model is the one the reference uses: silero-vad 5.1.2's default model (package data,
data/silero_vad_5.1.2/: its ONNX export, on onnxruntime without torch; a test shows it gives the
same segments as that release's JIT model, which `load_silero_vad()` loads by default).

Silero's get_speech_timestamps is split in two: the model's speech probability per 512-sample
window (speech_probabilities, run where the model lives) and silero's rule that turns those
probabilities into segments (pure.metrics.vad_segments, always here). Both paths therefore give
the same segments for the same probabilities.
"""
import threading

import numpy as np

from theval_mesh.backends.audio.model import MODEL_FILE, vad_provenance
from theval_mesh.backends.audio.resample import resample
from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.audio.silero_onnx import SileroOnnx
from theval_mesh.backends.liveness import check
from theval_mesh.backends.media.audio import EXTRACTION, MOVIEPY_RATE, Audio
from theval_mesh.pure.metrics.loudness import rms_envelope
from theval_mesh.pure.metrics.profiles import REFERENCE
from theval_mesh.pure.metrics.vad_segments import RATE as VAD_RATE
from theval_mesh.pure.metrics.vad_segments import WINDOW, speech_segments

CHECK_WINDOWS = 256  # windows (~8 s of audio) between two checks that the caller still waits


def load_vad_model() -> SileroOnnx:
    return SileroOnnx(MODEL_FILE)


def speech_probabilities(model, waves: list[np.ndarray], cancelled=None) -> list[np.ndarray]:
    """Silero's speech probability for each 512-sample window of each 16 kHz wave, exactly as
    get_speech_timestamps computes them (state reset first, last window zero-padded).

    Several waves run as one batch: each is zero-padded to the longest. The model is causal, so
    padding after a wave's end changes none of its windows (a test checks the batch against
    waves run alone). model: SileroOnnx, or anything with its reset_states() and window()."""
    if not waves:
        return []
    counts = [-(-len(w) // WINDOW) for w in waves]
    batch = np.zeros((len(waves), max(counts) * WINDOW), np.float32)
    for row, w in zip(batch, waves):
        row[:len(w)] = w
    model.reset_states()
    probs = np.empty((len(waves), max(counts)), np.float32)
    for k in range(max(counts)):
        if k % CHECK_WINDOWS == 0:
            check(cancelled)
        probs[:, k] = model.window(batch[:, k * WINDOW:(k + 1) * WINDOW])
    return [probs[i, :n].copy() for i, n in enumerate(counts)]


class LocalVad:
    """Silero VAD in this process. Its ONNX wrapper keeps state between windows: one call at a time."""
    served_by = "in-process"

    def __init__(self):
        self._model = load_vad_model()
        self._lock = threading.Lock()

    def probabilities(self, waves: list[np.ndarray], cancelled=None) -> list[np.ndarray]:
        with self._lock:
            return speech_probabilities(self._model, waves, cancelled)

    def provenance(self) -> str:
        return vad_provenance()


class AudioBackend:
    """vad: LocalVad (default) or rpc.triton.client.TritonVad (same interface)."""

    def __init__(self, vad=None):
        self.vad = vad or LocalVad()

    def provenance(self) -> str:
        return self.vad.provenance()

    def speech_segments(self, *waves_16k: np.ndarray, cancelled=None) -> list[list[tuple[float, float]]]:
        """Speech segments in seconds of each 16 kHz wave (one VAD batch; waves not empty)."""
        waves = [np.ascontiguousarray(w, dtype=np.float32) for w in waves_16k]
        probs = self.vad.probabilities(waves, cancelled)
        return [speech_segments(p, len(w)) for p, w in zip(probs, waves)]

    def analyse(self, audio: Audio, profile: str = REFERENCE, cancelled=None) -> AudioSeries:
        """The audio stage: loudness envelope and VAD speech segments, from the signals the profile
        reads (backends.media.audio): `reference` as the reference scripts extract them, each metric its own;
        `paper` the decoded track for both. cancelled: backends.liveness."""
        if profile == REFERENCE:
            rms, times = rms_envelope(audio.moviepy, MOVIEPY_RATE)
            sync, silence = self.speech_segments(resample(audio.moviepy, MOVIEPY_RATE, VAD_RATE),
                                                 resample(audio.pcm16, audio.rate, VAD_RATE), cancelled=cancelled)
        else:
            rms, times = rms_envelope(audio.samples, audio.rate)
            sync, = self.speech_segments(resample(audio.samples, audio.rate, VAD_RATE), cancelled=cancelled)
            silence = sync
        return AudioSeries(rms, times, sync, silence, EXTRACTION[profile])
