"""Triton python-backend model topiq_nr_face: the code is theval_mesh.rpc.triton.python_models."""
from theval_mesh.rpc.triton.python_models import QualityModel as TritonPythonModel  # noqa: F401
