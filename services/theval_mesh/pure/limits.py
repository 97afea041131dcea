"""Input limits, configurable from flags or THEVAL_* environment variables."""
import os
from dataclasses import dataclass, field


def _env(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def _limit(env: str, default, help: str = ""):
    """A limit whose default `env` overrides (read at import). One with a help text is also a
    servers' flag and variable (pure.settings.LIMIT_SETTINGS, which keeps the declared default)."""
    return field(default=type(default)(_env(env, default)), metadata={"env": env, "help": help, "default": default})


@dataclass(frozen=True)
class Limits:
    max_side_px: int = _limit("THEVAL_MAX_SIDE_PX", 4096, "largest video side accepted, px")
    max_duration_s: float = _limit("THEVAL_MAX_DURATION_S", 600.0, "longest video accepted, s")
    max_bytes: int = _limit("THEVAL_MAX_BYTES", 2 * 1024 ** 3)
    # Pixels decoded per video (width x height summed over frames): bounds the decoding work
    # whatever the headers say. The default (1.25e11) passes 1920x1080 at 60 fps for 600 s (7.5e10).
    max_pixels: int = _limit("THEVAL_MAX_PIXELS", int(1.25e11))
