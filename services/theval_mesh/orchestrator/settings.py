"""Settings of one evaluation run: everything that changes the numbers."""
from dataclasses import asdict, dataclass, field

from ..media.limits import Limits
from ..metrics.profiles import REFERENCE, check_profile

QUALITY_MODES = ("auto", "paper", "proxy")


@dataclass(frozen=True)
class RunSettings:
    profile: str = REFERENCE
    quality: str = "auto"
    frame_stride: int = 1
    exact_reference: bool = False
    normalise_translation: bool = False
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self):
        check_profile(self.profile)
        if self.quality not in QUALITY_MODES:
            raise ValueError(f"unknown quality mode {self.quality!r}: use one of {', '.join(QUALITY_MODES)}")
        if self.frame_stride < 1:
            raise ValueError("frame stride must be >= 1")

    def key(self) -> dict:
        """What must match for a stored result to be reused (limits do not change values)."""
        d = asdict(self)
        d.pop("limits")
        return d
