"""RMS loudness envelope, as librosa.feature.rms computes it with the reference's settings."""
import numpy as np

WINDOW_S = 0.05


def rms_envelope(samples: np.ndarray, sr: int) -> tuple[np.ndarray, np.ndarray]:
    """Mono samples -> (rms per window, window times in s).

    Windows and hop of int(0.05*sr) samples, centred, zero padding of half a window at each
    edge (librosa's defaults: center=True, pad_mode='constant'); window k sits at k*hop/sr.
    """
    y = np.asarray(samples, dtype=np.float64)
    n = int(WINDOW_S * sr)
    pad = n // 2
    y = np.pad(y, (pad, pad), mode="constant")
    count = 1 + (len(y) - n) // n if len(y) >= n else 0
    frames = np.lib.stride_tricks.sliding_window_view(y, n)[::n][:count]
    rms = np.sqrt(np.mean(frames ** 2, axis=1))
    return rms, np.arange(count) * n / sr


def loudness_at(frame_times: np.ndarray, rms: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The RMS envelope linearly interpolated at each video frame time (held flat past the ends)."""
    if len(rms) == 0:
        return np.zeros(len(frame_times))
    return np.interp(frame_times, times, rms)
