"""Beyond THEval: how far the audio is from the picture, in milliseconds, with a confidence.

The mouth opens when the voice is loud. Over the speech (the VAD's segments, widened by the
largest lag so that a shifted voice is still inside), the mouth openness at each frame is
correlated with the loudness envelope read `lag` seconds later, for every lag on a fine grid
(the envelope is interpolated: finer than a frame); the estimate is the lag of the highest
correlation. Positive: the audio comes late (a sound is heard after the mouth makes it).
Confidence, as SyncNet's: the peak correlation minus the median over all lags (0: no peak).
"""
from dataclasses import dataclass

import numpy as np

MAX_LAG_S = 0.5
STEP_S = 0.005
MIN_FRAMES = 10  # speech frames with a face needed for an estimate


@dataclass(frozen=True)
class Offset:
    ms: float          # NaN when there is too little speech with a face
    confidence: float  # peak correlation minus the median over lags
    peak: float        # the correlation at the estimate
    frames: int        # frames behind it

    def __post_init__(self):
        for name in ("ms", "confidence", "peak"):
            object.__setattr__(self, name, float(getattr(self, name)))


NONE = Offset(float("nan"), float("nan"), float("nan"), 0)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    scale = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / scale) if scale > 0 else float("nan")


def av_offset(openness: np.ndarray, frame_times: np.ndarray, rms: np.ndarray, rms_times: np.ndarray,
              speech: np.ndarray, max_lag_s: float = MAX_LAG_S, step_s: float = STEP_S) -> Offset:
    """openness and speech (bool) per frame at frame_times (s); the RMS envelope at rms_times."""
    openness, frame_times = np.asarray(openness, float), np.asarray(frame_times, float)
    rms, rms_times = np.asarray(rms, float), np.asarray(rms_times, float)
    speech = np.asarray(speech, bool)
    if len(rms) < 2 or not speech.any():
        return NONE
    # speech widened by the largest lag each way: a voice shifted that far is still counted
    fps = 1.0 / np.median(np.diff(frame_times)) if len(frame_times) > 1 else 25.0
    reach = int(np.ceil(max_lag_s * fps))
    widened = np.convolve(speech.astype(float), np.ones(2 * reach + 1))[reach:reach + len(speech)] > 0
    used = widened & np.isfinite(openness)
    if used.sum() < MIN_FRAMES:
        return NONE
    o, t = openness[used], frame_times[used]
    lags = np.arange(-max_lag_s, max_lag_s + step_s / 2, step_s)
    scores = np.array([_correlation(o, np.interp(t + lag, rms_times, rms)) for lag in lags])
    if not np.isfinite(scores).any():
        return NONE
    best = int(np.nanargmax(scores))
    ms = round(1000.0 * lags[best], 3)  # the grid's own value, not its float noise
    return Offset(ms, scores[best] - np.nanmedian(scores), scores[best], int(used.sum()))
