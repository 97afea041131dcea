"""An exported network on an inference runtime: numpy arrays in, numpy arrays out.

Both runtimes are held to fp32 arithmetic: OpenVINO's CPU plugin would otherwise pick bf16 on a
processor that has it (INFERENCE_PRECISION_HINT), which is not the network's numbers."""
from pathlib import Path

import numpy as np


def _threads() -> int:
    """The threads the networks may use: torch's setting (the Ray worker's share of the cores
    sets it), else every core."""
    try:
        import torch
        return max(1, torch.get_num_threads())
    except ImportError:
        import os
        return os.cpu_count() or 1


class OnnxRuntimeSession:
    """onnxruntime on the CPU, or on a GPU through its CUDA provider (onnxruntime-gpu)."""
    name = "onnxruntime"

    def __init__(self, path: Path, device: str = "cpu"):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = _threads()
        options.inter_op_num_threads = 1
        # Detector inputs change size with every frame size: an arena keeps the largest buffers
        # of every shape it met; without it memory follows the frame in hand.
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        if device.startswith("cuda"):
            index = int(device.split(":")[1]) if ":" in device else 0
            providers = [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(str(path), options, providers=providers)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.version = ort.__version__

    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.session.run(None, dict(zip(self.inputs, arrays, strict=True)))


class OpenVinoSession:
    """OpenVINO's CPU plugin, compiled once for dynamic shapes, in fp32."""
    name = "openvino"

    def __init__(self, path: Path, device: str = "cpu"):
        import openvino as ov

        if device != "cpu":
            raise ValueError("the OpenVINO runtime is used on the CPU only")
        core = ov.Core()
        # Its compiled blobs beside the ONNX file, keyed by OpenVINO itself (its version, the
        # graph, the CPU): a process compiles each network once, later ones load it.
        core.set_property({"CACHE_DIR": str(Path(path).parent / f"openvino-{ov.__version__.split('-')[0]}")})
        config = {"INFERENCE_NUM_THREADS": _threads(), "INFERENCE_PRECISION_HINT": "f32",
                  "PERFORMANCE_HINT": "LATENCY"}
        self.model = core.compile_model(str(path), "CPU", config)
        self.request = self.model.create_infer_request()
        self.version = ov.__version__.split("-")[0]

    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        results = self.request.infer(list(arrays))
        return [np.array(results[out], copy=True) for out in self.model.outputs]


SESSIONS = {OnnxRuntimeSession.name: OnnxRuntimeSession, OpenVinoSession.name: OpenVinoSession}


def runtime_version(name: str) -> str:
    """The installed version of a runtime, without starting it."""
    from importlib.metadata import PackageNotFoundError, version
    packages = {"torch": ("torch",), "onnxruntime": ("onnxruntime", "onnxruntime-gpu"), "openvino": ("openvino",)}
    for package in packages[name]:
        try:
            return version(package)
        except PackageNotFoundError:
            continue
    return "not installed"
