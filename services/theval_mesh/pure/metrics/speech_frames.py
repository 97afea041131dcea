"""Map VAD speech segments (seconds) onto video frames, as the reference scripts do."""
import numpy as np

MIN_SILENCE_RUN_S = 0.3


def speech_mask(segments, fps: float, total_frames: int) -> np.ndarray:
    """(total_frames,) bool: frames int(s*fps)..int(e*fps) inclusive of each segment, capped."""
    mask = np.zeros(total_frames, dtype=bool)
    for start, end in segments:
        first, last = int(start * fps), int(end * fps)
        mask[max(first, 0):min(last + 1, total_frames)] = True
    return mask


def silent_frames(segments, fps: float, total_frames: int,
                  min_run_s: float = MIN_SILENCE_RUN_S) -> np.ndarray:
    """Sorted frame indices not covered by speech, in runs at least `min_run_s*fps` frames long."""
    silent = ~speech_mask(segments, fps, total_frames)
    kept = []
    start = None
    for i in range(total_frames + 1):
        if i < total_frames and silent[i]:
            if start is None:
                start = i
        elif start is not None:
            if i - start >= min_run_s * fps:
                kept.extend(range(start, i))
            start = None
    return np.array(kept, dtype=np.int64)
