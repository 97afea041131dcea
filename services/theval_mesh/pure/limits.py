"""Input limits, configurable from flags or THEVAL_* environment variables."""
import os
from dataclasses import dataclass


def _env(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


@dataclass(frozen=True)
class Limits:
    max_side_px: int = int(_env("THEVAL_MAX_SIDE_PX", 4096))
    max_duration_s: float = _env("THEVAL_MAX_DURATION_S", 600.0)
    max_bytes: int = int(_env("THEVAL_MAX_BYTES", 2 * 1024 ** 3))
    # Pixels decoded per video (width x height summed over frames): bounds the decoding work
    # whatever the headers say. The default (1.25e11) passes 1920x1080 at 60 fps for 600 s (7.5e10).
    max_pixels: int = int(_env("THEVAL_MAX_PIXELS", 1.25e11))
