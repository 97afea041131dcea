"""Triton python-backend model facexformer: the code is theval_mesh.rpc.triton.python_models."""
from theval_mesh.rpc.triton.python_models import HeadPoseModel as TritonPythonModel  # noqa: F401
