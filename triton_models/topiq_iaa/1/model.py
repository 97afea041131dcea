"""Triton python-backend model topiq_iaa: the code is theval_mesh.rpc.triton.python_models."""
from theval_mesh.rpc.triton.python_models import QualityModel as TritonPythonModel  # noqa: F401
