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
