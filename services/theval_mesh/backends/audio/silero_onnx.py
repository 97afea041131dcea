"""Silero VAD's ONNX model on onnxruntime, fed exactly as silero-vad's OnnxWrapper feeds it.

Without torch (whose import alone cost a second of every run's start-up): the same session
options (CPU, one thread each way), the same inputs (each 512-sample window after the previous
window's last 64 samples, zeros before the first; the recurrent state carried over, zeros at
first; the rate as an int64 scalar), hence the same probabilities to the bit (a test runs both).
"""
import numpy as np
import onnxruntime

CONTEXT = 64   # samples of the previous window the model also reads (OnnxWrapper's context_size)
STATE = (2, 128)  # the recurrent state per row of a batch: (2, batch, 128)
RATE = np.array(16000, dtype=np.int64)


class SileroOnnx:
    """One window at a time, the state between windows kept here: one caller at a time."""

    def __init__(self, path: str):
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=opts)
        self.reset_states()

    def reset_states(self):
        self._state = self._context = None

    def window(self, chunk: np.ndarray) -> np.ndarray:
        """(batch, 512) float32 at 16 kHz -> (batch,) speech probabilities; state carried on."""
        chunk = np.asarray(chunk, dtype=np.float32)
        if self._state is None or self._state.shape[1] != len(chunk):
            self._state = np.zeros((STATE[0], len(chunk), STATE[1]), np.float32)
            self._context = np.zeros((len(chunk), CONTEXT), np.float32)
        x = np.concatenate([self._context, chunk], axis=1)
        out, self._state = self.session.run(None, {"input": x, "state": self._state, "sr": RATE})
        self._context = x[:, -CONTEXT:]
        return out.reshape(-1)
