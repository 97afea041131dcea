"""What the audio stage produces for one video; shared by the embedded and mesh paths."""
from dataclasses import dataclass

import numpy as np


@dataclass
class AudioSeries:
    """None fields: the video has no audio track."""
    rms: np.ndarray | None = None        # loudness envelope for lip-sync (pure.metrics.loudness)
    rms_times: np.ndarray | None = None  # time of each envelope window, s
    speech: list[tuple[float, float]] | None = None          # VAD segments lip-sync uses, s
    silence_speech: list[tuple[float, float]] | None = None  # ... and silent-lip stability
    extraction: str = ""  # how the signals were taken from the file (backends.media.audio.EXTRACTION)
    problem: str | None = None  # why the file's audio track cannot be used (backends.media.audio.Audio)

    def __post_init__(self):
        if self.silence_speech is None:  # one VAD for both metrics
            self.silence_speech = self.speech
