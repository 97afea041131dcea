"""Quality metrics backend (pyiqa models or a training-free proxy) and its weights store."""
from theval_mesh.backends.quality.backend import QualityBackend
from theval_mesh.backends.weights.registry import METRIC_MODELS, MODELS, QualityModel, WeightFile
from theval_mesh.backends.weights.store import default_store, fetch, missing_files, sha256_file, status, verify

__all__ = ["METRIC_MODELS", "MODELS", "QualityBackend", "QualityModel", "WeightFile",
           "default_store", "fetch", "missing_files", "sha256_file", "status", "verify"]
