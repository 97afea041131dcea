"""Settings of one evaluation run: everything that changes the numbers."""
from dataclasses import asdict, dataclass, field

from theval_mesh.pure.limits import Limits
from theval_mesh.pure.metrics.profiles import REFERENCE, check_profile

QUALITY_MODES = ("auto", "paper", "proxy")


@dataclass(frozen=True)
class RunSettings:
    profile: str = REFERENCE
    quality: str = "auto"
    frame_stride: int = 1
    single_pass: bool = False  # one shared FaceMesh pass instead of the reference's own passes
    normalise_translation: bool = False
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self):
        check_profile(self.profile)
        if self.quality not in QUALITY_MODES:
            raise ValueError(f"unknown quality mode {self.quality!r}: use one of {', '.join(QUALITY_MODES)}")
        if self.frame_stride < 1:
            raise ValueError("frame stride must be >= 1")

    @classmethod
    def from_key(cls, key: dict, **extra) -> "RunSettings":
        """Settings from a stored key(). Keys written before `single_pass` existed had
        `exact_reference` (False meant the single pass)."""
        key = dict(key)
        if "exact_reference" in key:
            key["single_pass"] = not key.pop("exact_reference")
        return cls(**key, **extra)

    def key(self) -> dict:
        """What must match for a stored result to be reused (limits do not change values)."""
        d = asdict(self)
        d.pop("limits")
        return d
