"""The VAD model's files and how results name it (no torch here: provenance reads it in every process)."""
import importlib.resources
import os

from theval_mesh.backends.checksum import sha256_file

MODEL_DIR = str(importlib.resources.files("theval_mesh") / "data" / "silero_vad_5.1.2")
MODEL_FILE = os.path.join(MODEL_DIR, "silero_vad.onnx")
JIT_FILE = os.path.join(MODEL_DIR, "silero_vad.jit")
REFERENCE_VAD = "silero-vad 5.1.2 model"  # what the reference's `load_silero_vad()` loads


def vad_provenance() -> str:
    return f"{REFERENCE_VAD} silero_vad.onnx sha256:{sha256_file(MODEL_FILE)[:16]}"
