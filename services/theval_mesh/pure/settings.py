"""Settings of one evaluation run: everything that changes the numbers, declared once.

Each run setting is a RunSettings field declared with _setting(): its default, the servers'
THEVAL_* variable, help text and choices. SETTINGS, the table read from those fields, generates
the scoring commands' flags (commands.evaluate), the servers' flags and variables (rpc.config) and
the proto conversion (rpc.wire: the proto's fields are named as these). LIMIT_SETTINGS are the
size limits (Limits) that the servers take as flags and variables too; they do not change the
numbers.
"""
from dataclasses import asdict, dataclass, field, fields, replace
from typing import get_type_hints

from theval_mesh.pure.limits import Limits
from theval_mesh.pure.metrics.profiles import PROFILES, REFERENCE, check_profile

QUALITY_MODES = ("auto", "paper", "proxy")
# auto: FaceXFormer when its weights are in the store, else the rigid fit (as --quality auto)
HEADPOSE_MODES = ("auto", "facexformer", "rigid-fit")


def _setting(default, env: str, help: str, choices: tuple | None = None):
    return field(default=default, metadata={"env": env, "help": help, "choices": choices, "default": default})


@dataclass(frozen=True)
class RunSettings:
    profile: str = _setting(REFERENCE, "THEVAL_PROFILE",
                            "reference: reproduce the reference code (default); paper: the paper's formulas",
                            PROFILES)
    quality: str = _setting("auto", "THEVAL_QUALITY",
                            "quality models: paper (needs weights), proxy (training-free), auto (default)",
                            QUALITY_MODES)
    headpose: str = _setting("auto", "THEVAL_HEADPOSE",
                             "head pose: facexformer (the reference's FaceXFormer on RetinaFace crops; needs "
                             "weights), rigid-fit (FaceMesh landmarks, offline stand-in), auto (default: "
                             "facexformer when its weights are present)", HEADPOSE_MODES)
    frame_stride: int = _setting(1, "THEVAL_FRAME_STRIDE", "use every Nth frame (default 1)")
    single_pass: bool = _setting(False, "THEVAL_SINGLE_PASS",
                                 "speed option: one shared FaceMesh pass for every landmark metric instead of the "
                                 "reference code's own passes (about 3x faster; values differ, see docs/metrics.md; "
                                 "never comparable with the published GT)")
    normalise_translation: bool = _setting(False, "THEVAL_NORMALISE_TRANSLATION",
                                           "head motion: express the face centre at 512 px so T does not grow "
                                           "with resolution")
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self):
        check_profile(self.profile)
        if self.quality not in QUALITY_MODES:
            raise ValueError(f"unknown quality mode {self.quality!r}: use one of {', '.join(QUALITY_MODES)}")
        if self.headpose not in HEADPOSE_MODES:
            raise ValueError(f"unknown head-pose mode {self.headpose!r}: use one of {', '.join(HEADPOSE_MODES)}")
        if self.frame_stride < 1:
            raise ValueError("frame stride must be >= 1")

    @classmethod
    def from_values(cls, values) -> "RunSettings":
        """Settings from {name: value} (vars() of parsed flags, a server's loaded variables) for the
        names of SETTINGS and LIMIT_SETTINGS; other names are ignored, None or absent is the default."""
        given = {s.name: values[s.name] for s in SETTINGS + LIMIT_SETTINGS if values.get(s.name) is not None}
        limits = replace(Limits(), **{s.name: given.pop(s.name) for s in LIMIT_SETTINGS if s.name in given})
        return cls(**given, limits=limits)

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


@dataclass(frozen=True)
class Setting:
    """One row of the table: a RunSettings (or Limits) field, its flag and its variable."""
    name: str
    kind: type  # str, int, float or bool (a flag without a value)
    default: object
    env: str
    help: str
    choices: tuple | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _table(cls) -> tuple[Setting, ...]:
    """The fields of `cls` declared with a help text, in their order."""
    kinds = get_type_hints(cls)
    return tuple(Setting(f.name, kinds[f.name], **f.metadata) for f in fields(cls) if f.metadata.get("help"))


SETTINGS = _table(RunSettings)
LIMIT_SETTINGS = _table(Limits)
