"""Triton python-backend model silero_vad: the code is theval_mesh.triton.python_models."""
from theval_mesh.triton.python_models import VadModel as TritonPythonModel  # noqa: F401
