"""Triton python-backend model topiq_iaa: the code is theval_mesh.rpc.triton.python_models."""
import os
import sys

# The stub's interpreter is isolated: PYTHONPATH is honoured here, as a plain python3 would.
sys.path[:0] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
from theval_mesh.rpc.triton.python_models import QualityTritonModel as TritonPythonModel  # noqa: E402, F401
