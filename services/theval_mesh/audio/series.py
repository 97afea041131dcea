"""What the audio stage produces for one video; shared by the embedded and mesh paths."""
from dataclasses import dataclass

import numpy as np


@dataclass
class AudioSeries:
    """None fields: the video has no audio track."""
    rms: np.ndarray | None = None        # loudness envelope at the native rate (metrics.loudness)
    rms_times: np.ndarray | None = None  # time of each envelope window, s
    speech: list[tuple[float, float]] | None = None
