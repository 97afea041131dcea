"""The pyiqa quality models run in this process, built from the weights store on first use."""
import threading

import numpy as np

from theval_mesh.backends.inference.plan import resolve
from theval_mesh.backends.quality.inference import score
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import MODELS


def missing_weights_reason(store, missing: list[str]) -> str:
    """One line naming the store, the missing files and the fix."""
    return (f"quality weights missing from the store {store}: {', '.join(missing)}; {ws.FETCH_HINT}, "
            f"or copy those files into {store} by hand (`theval weights status` lists their URLs)")


class LocalModels:
    """QualityBackend's models, in-process. Thread-safe; each model is built once, and runs one
    call at a time: a pyiqa model keeps per-call state (topiq_nr-face's face helper holds the faces
    of the image in progress), so two calls at once (a service's concurrent requests) would mix
    two videos' faces or fail. Different models still run at the same time."""
    served_by = "in-process"

    def __init__(self, store, inference=None):
        """inference: pure.inference.InferenceOptions (default: auto runtime and device, fp32)."""
        self.store, self.options = store, inference
        self._plan = None
        self._metrics: dict = {}
        self._files: dict = {}  # model name -> {file name: sha256 of what was loaded}
        self._lock = threading.Lock()
        self._running: dict = {}  # model name -> the lock its calls hold

    def unavailable(self, names) -> str | None:
        """Why some of these models cannot run (None: all can); nothing is loaded."""
        missing = ws.missing_files(self.store, names)
        return missing_weights_reason(self.store, missing) if missing else None

    @property
    def plan(self):
        """Where and how the networks run (backends.inference.plan), decided on first use."""
        if self._plan is None:
            self._plan = resolve(self.options)
        return self._plan

    def load(self, name: str):
        with self._lock:
            if name not in self._metrics:
                from theval_mesh.backends.quality.pyiqa_models import build
                qmodel, plan = MODELS[name], self.plan.on(name)
                metric = build(qmodel, self.store, plan.device if plan.runtime == "torch" else "cpu")
                files = {f.name: ws.sha256_file(self.store / f.name) for f in qmodel.files}
                if plan.runtime != "torch":
                    from theval_mesh.backends.inference.networks import swap_quality_model
                    swap_quality_model(metric, qmodel, plan, self.store, files)
                self._metrics[name], self._files[name] = metric, files
                self._running[name] = threading.Lock()
            return self._metrics[name]

    def scores(self, name: str, images: list[np.ndarray], each: bool = False) -> np.ndarray:
        metric = self.load(name)
        with self._running[name]:
            return score(metric, images, each, self.plan.on(name))

    def describe(self, name: str) -> dict:
        """{"pyiqa": version, "files": {file name: sha256}, "stand_in": {file name: seed}} of the
        loaded model (stand_in: its files that are deterministic stand-ins, see backends/stand_in)."""
        import pyiqa
        self.load(name)
        files = dict(self._files[name])
        seeds = {f: ws.stand_in_seed(self.store, f, sha) for f, sha in files.items()}
        return {"pyiqa": pyiqa.__version__, "files": files,
                "stand_in": {f: s for f, s in seeds.items() if s is not None}}

    def inference(self, names) -> dict:
        """{"device", "precision", "runtimes": {model: runtime and version}} of these models."""
        return self.plan.describe(names)
