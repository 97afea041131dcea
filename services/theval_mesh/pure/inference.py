"""How the networks run: runtime, device and precision, as a user asks for them.

Where they run never changes an fp32 number beyond float rounding (the runtimes' outputs are held
to 1e-5 relative of eager PyTorch by the tests), so runtime and device are NOT part of what GT and
models must share. Precision is: an fp16 or bf16 run computes other numbers, so it is labelled
and a mix with fp32 is refused (pure.scoring.compat).

Resolving "auto" needs to know the machine and the runtimes installed: backends.inference.plan.
"""
from dataclasses import asdict, dataclass

from theval_mesh.pure.errors import UsageRefused

RUNTIMES = ("auto", "torch", "onnxruntime", "openvino")
PRECISIONS = ("fp32", "fp16", "bf16")
FP32 = "fp32"
DEVICE_HELP = "auto (a GPU when there is one), cpu, cuda or cuda:N"


def check_device(device: str) -> str:
    """The device spelled as torch spells it ('cpu', 'cuda', 'cuda:1') or 'auto'."""
    d = (device or "auto").strip().lower()
    if d in ("auto", "cpu", "cuda"):
        return d
    if d.startswith("cuda:") and d[5:].isdigit():
        return f"cuda:{int(d[5:])}"
    raise UsageRefused(f"--device must be {DEVICE_HELP}, not {device!r}")


@dataclass(frozen=True)
class InferenceOptions:
    """What the user asked for; backends.inference.plan.resolve() makes it concrete."""
    runtime: str = "auto"
    device: str = "auto"
    precision: str = FP32

    def __post_init__(self):
        if self.runtime not in RUNTIMES:
            raise UsageRefused(f"--runtime must be one of {', '.join(RUNTIMES)}, not {self.runtime!r}")
        if self.precision not in PRECISIONS:
            raise UsageRefused(f"--precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        object.__setattr__(self, "device", check_device(self.device))

    @classmethod
    def from_values(cls, values) -> "InferenceOptions":
        """From {name: value} (vars() of parsed flags, a server's variables); None is the default."""
        return cls(**{k: values[k] for k in ("runtime", "device", "precision") if values.get(k) is not None})

    def to_dict(self) -> dict:
        return asdict(self)


def precision_label(provenance_inference) -> str:
    """The precision a result's provenance records ('fp32' for results that record none: every
    result before precision was an option ran at fp32)."""
    if isinstance(provenance_inference, dict):
        return str(provenance_inference.get("precision") or FP32)
    return FP32
