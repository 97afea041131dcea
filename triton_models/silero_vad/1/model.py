"""Triton python-backend model silero_vad: the code is theval_mesh.rpc.triton.python_models."""
from theval_mesh.rpc.triton.python_models import VadModel as TritonPythonModel  # noqa: F401
