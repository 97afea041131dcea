"""The one place where runtime, device and precision are decided, for every network.

`resolve(options)` turns what the user asked for (pure.inference.InferenceOptions) into a Plan:
  device     "auto" is the first GPU when one is usable (torch sees CUDA), else the CPU; "cuda"
             without a usable GPU is refused, in one line, before any work (exit 2);
  runtime    "auto" is, per network, the runtime measured fastest on that device (FASTEST,
             bench/network_speed.py; docs/benchmarks.md has the table), among those installed;
             "torch" is eager PyTorch, the yardstick every other runtime is checked against;
  precision  fp32 unless asked: fp16 and bf16 run on torch (autocast), are labelled in every
             result's provenance, and a GT and a model at different precisions are refused.
"""
import contextlib
from dataclasses import dataclass

from theval_mesh.backends.inference.sessions import runtime_version
from theval_mesh.pure.errors import UsageRefused
from theval_mesh.pure.inference import FP32, InferenceOptions

# The networks, by the names the export cache and provenance use.
# topiq_nr-face is two networks, facexlib's RetinaFace-R50 and CFANet: one runtime runs both.
NETWORKS = ("topiq_iaa", "musiq", "musiq-spaq", "topiq_nr-face", "retinaface", "facexformer")
# Fastest fp32 runtime per network, measured on the project's 2-core CPU (bench/network_speed.py,
# the same inputs on each runtime, one run; docs/benchmarks.md). On a GPU nothing has been
# measured yet (bench/gpu_check.sh measures it): eager torch on CUDA, the yardstick, until then.
FASTEST = {
    "cpu": {n: "openvino" for n in NETWORKS},
    "cuda": {n: "torch" for n in NETWORKS},
}
FALLBACK = {"openvino": "onnxruntime", "onnxruntime": "torch", "torch": "torch"}


def gpus() -> int:
    """Usable CUDA devices (torch's count; 0 without torch or without a driver)."""
    try:
        import torch
    except ImportError:
        return 0
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except RuntimeError:  # a driver that fails to initialise is no usable GPU
        return 0


def resolve_device(device: str) -> str:
    """'cpu' or 'cuda:N' for a checked device spelling ('auto', 'cpu', 'cuda', 'cuda:N')."""
    if device == "cpu":
        return "cpu"
    count = gpus()
    if device == "auto":
        return "cuda:0" if count else "cpu"
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= count:
        have = f"{count} usable GPU(s)" if count else "no usable GPU (torch.cuda.is_available() is False)"
        raise UsageRefused(f"--device {device}: this machine has {have}; use --device cpu or auto")
    return f"cuda:{index}"


def installed(runtime: str) -> bool:
    return runtime_version(runtime) != "not installed"


@dataclass(frozen=True)
class Plan:
    device: str  # "cpu" or "cuda:N"
    precision: str
    asked: str  # the runtime asked for: auto or a name

    def runtime(self, network: str) -> str:
        """The runtime that runs `network` here."""
        if self.asked != "auto":
            return self.asked
        if self.precision != FP32:
            return "torch"
        name = FASTEST["cpu" if self.device == "cpu" else "cuda"].get(network, "torch")
        while not installed(name):
            name = FALLBACK[name]
        return name

    def on(self, network: str) -> "NetworkPlan":
        return NetworkPlan(self.runtime(network), self.device, self.precision)

    def describe(self, networks) -> dict:
        return describe({n: self.on(n) for n in networks})


@dataclass(frozen=True)
class NetworkPlan:
    """How one network runs."""
    runtime: str
    device: str
    precision: str

    def autocast(self):
        """torch's autocast at a lower precision (a no-op at fp32)."""
        if self.precision == FP32:
            return contextlib.nullcontext()
        import torch
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[self.precision]
        return torch.autocast("cuda" if self.device.startswith("cuda") else "cpu", dtype=dtype)


TORCH_CPU = NetworkPlan("torch", "cpu", FP32)  # eager PyTorch on the CPU at fp32: the yardstick


def describe(plans: dict) -> dict:
    """{"device", "precision", "runtimes": {network: "runtime version"}} of {network: NetworkPlan},
    for provenance."""
    first = next(iter(plans.values()))
    return {"device": first.device, "precision": first.precision,
            "runtimes": {n: f"{p.runtime} {runtime_version(p.runtime)}" for n, p in plans.items()}}


def check_options(options: InferenceOptions) -> None:
    """Refuse, before any work, what this machine cannot run (a GPU it lacks, a runtime not
    installed). The defaults are always possible and cost no import."""
    if options != InferenceOptions():
        resolve(options)


def resolve(options: InferenceOptions | None = None) -> Plan:
    options = options or InferenceOptions()
    device = resolve_device(options.device)
    if options.runtime not in ("auto", "torch"):
        if options.precision != FP32:
            raise UsageRefused(f"--precision {options.precision} runs on --runtime torch (autocast); "
                               f"{options.runtime} runs fp32 only")
        if not installed(options.runtime):
            raise UsageRefused(f"--runtime {options.runtime} is not installed: pip install {options.runtime}")
        if options.runtime == "openvino" and device != "cpu":
            raise UsageRefused(f"--runtime openvino runs on the CPU, not {device}: use --device cpu "
                               "or another runtime")
    return Plan(device, options.precision, options.runtime)
