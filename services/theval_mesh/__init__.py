"""THEval metric mesh: score talking-head videos on the 8 THEval metrics and a Final score.

    from theval_mesh import evaluate, Scorer, Client

evaluate() scores folders and ranks models (as `theval evaluate`), Scorer one video at a time in
this process, Client through a running mesh, classic() the standard talking-head metrics (LSE-C/D,
LMD, PSNR/SSIM, ...) beside them, robustness() each metric's noise floor; write_report() and log_to_mlflow() turn a results
folder into the HTML report and an MLflow run. They are imported on first use, so `import
theval_mesh` stays cheap (a mesh service process never loads what it does not serve).
"""
import importlib

from theval_mesh import malloc
from theval_mesh.pure.version import VERSION as __version__

malloc.tune()  # before any network allocates: see theval_mesh/malloc.py

# public name -> the module of theval_mesh.api that defines it
_API = {
    "evaluate": "evaluation", "Evaluation": "evaluation", "LeaderboardRow": "evaluation",
    "Scorer": "scorer",
    "classic": "classic", "ClassicRun": "classic", "ClassicRow": "classic",
    "robustness": "robustness", "Robustness": "robustness",
    "write_report": "reports", "log_to_mlflow": "reports", "MlflowRun": "reports",
    "Client": "client", "JobStatus": "client", "Reference": "client", "ScoredResult": "client", "Scores": "client",
}

# earlier public names -> today's (still importable, not listed)
_RENAMED = {"legacy": "classic", "LegacyRun": "ClassicRun", "LegacyRow": "ClassicRow"}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    current = _RENAMED.get(name, name)
    if current not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"theval_mesh.api.{_API[current]}"), current)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
