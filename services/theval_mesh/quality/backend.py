"""Quality backend: the paper's pyiqa models from the weights store, or a labelled proxy.

Inputs are RGB uint8 arrays (H x W x 3); the models see them as float in [0, 1], like
torchvision's ToTensor in the reference code. Scores: higher = better.
"""
import threading

import numpy as np

from theval_mesh.common.errors import UserError, WeightsMissing
from theval_mesh.metrics.quality import MOUTH_BATCH, batches, pad_to_batch
from theval_mesh.quality import proxy
from theval_mesh.quality import weights_store as ws
from theval_mesh.quality.registry import METRIC_MODELS, MODELS

MODES = ("auto", "paper", "proxy")
FRAME_BATCH = 64  # reference global_aesthetic.py; scores do not depend on it (no padding)
_NO_FACE = "No face detected"  # pyiqa's assertion when facexlib finds no face


def _check_images(images) -> list[np.ndarray]:
    images = list(images)
    for im in images:
        if not (isinstance(im, np.ndarray) and im.dtype == np.uint8 and im.ndim == 3
                and im.shape[2] == 3 and im.shape[0] > 0 and im.shape[1] > 0):
            raise ValueError("quality backend takes RGB uint8 arrays of shape (H, W, 3), got "
                             f"{getattr(im, 'dtype', type(im))} {getattr(im, 'shape', '')}")
    return images


def _to_tensor(images):
    import torch
    batch = np.ascontiguousarray(np.stack(images).transpose(0, 3, 1, 2))
    return torch.from_numpy(batch).float().div_(255.0)


class QualityBackend:
    """mode: "paper" (pyiqa models; WeightsMissing if a file is absent), "proxy" (training-free,
    see proxy.py) or "auto" (paper when every file is in the store, else proxy; `.notice` says
    which and why). profile: "reference" (musiq for mouths) or "paper" (musiq-spaq).
    Models load once, on first use or on `load()`. torch threads are left to the caller."""

    def __init__(self, mode: str = "auto", profile: str = "reference", store=None,
                 device: str = "cpu"):
        if mode not in MODES:
            raise UserError(f"quality mode must be one of {', '.join(MODES)}, not {mode!r}")
        if profile not in METRIC_MODELS:
            raise UserError(f"profile must be one of {', '.join(METRIC_MODELS)}, not {profile!r}")
        self.mode, self.profile, self.device = mode, profile, device
        self.store = ws.resolve(store)
        self.metric_models = dict(METRIC_MODELS[profile])
        names = sorted(set(self.metric_models.values()))
        missing = ws.missing_files(self.store, names)
        if mode == "paper" and missing:
            raise WeightsMissing(
                f"quality weights missing from the store {self.store}: {', '.join(missing)}; "
                f"{ws.FETCH_HINT}, or copy those files into {self.store} by hand "
                "(`theval weights status` lists their URLs)")
        use_models = mode == "paper" or (mode == "auto" and not missing)
        self.resolved_mode = "paper" if use_models else "proxy"
        if self.resolved_mode == "paper":
            why = "requested" if mode == "paper" else f"all weights found in {self.store}"
            self.notice = f"quality: paper models {', '.join(names)} ({why})"
        elif mode == "proxy":
            self.notice = f"quality: {proxy.NAME} (requested)"
        else:
            self.notice = (f"quality: {proxy.NAME} stands in for {', '.join(names)}: "
                           f"{len(missing)} weight file(s) missing from {self.store} "
                           f"({', '.join(missing)}); run `theval weights fetch` to use the models")
        self._metrics: dict = {}
        self._weights: dict = {}  # file name -> sha256 of what was loaded
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ loading
    def _metric(self, model_name: str):
        with self._lock:
            if model_name not in self._metrics:
                from theval_mesh.quality.pyiqa_models import build
                qmodel = MODELS[model_name]
                self._metrics[model_name] = build(qmodel, self.store, self.device)
                for f in qmodel.files:
                    self._weights[f.name] = ws.sha256_file(self.store / f.name)
            return self._metrics[model_name]

    def load(self) -> None:
        """Load every model now (servers call this before reporting SERVING)."""
        if self.resolved_mode == "paper":
            for name in sorted(set(self.metric_models.values())):
                self._metric(name)

    def _run(self, model_name: str, images) -> np.ndarray:
        import torch
        metric = self._metric(model_name)
        with torch.no_grad():
            out = metric(_to_tensor(images).to(self.device))
        return out.detach().cpu().reshape(-1).double().numpy()

    # ------------------------------------------------------------------ metrics
    def global_aesthetic(self, frames) -> np.ndarray:
        """topiq_iaa (1-10) per full frame, in batches of 64."""
        frames = _check_images(frames)
        if self.resolved_mode == "proxy":
            return np.array([proxy.score(f) for f in frames], dtype=np.float64)
        out = []
        for batch in batches(frames, FRAME_BATCH):
            if len({f.shape for f in batch}) == 1:
                out.append(self._run(self.metric_models["global_aesthetic"], batch))
            else:  # frames of one video share a size; mixed sizes cannot be stacked
                out.extend(self._run(self.metric_models["global_aesthetic"], [f]) for f in batch)
        return np.concatenate(out) if out else np.zeros(0)

    def mouth_quality(self, crops) -> np.ndarray:
        """musiq (reference) / musiq-spaq (paper) per mouth crop, as the reference code scores
        them: batches of 64 consecutive crops, each pasted top-left on a black canvas as large
        as the batch's largest crop, so the black border counts."""
        crops = _check_images(crops)
        out = []
        for batch in batches(crops, MOUTH_BATCH):
            padded = pad_to_batch(batch)
            if self.resolved_mode == "proxy":
                out.append(np.array([proxy.score(c) for c in padded], dtype=np.float64))
            else:
                out.append(self._run(self.metric_models["mouth_quality"], list(padded)))
        return np.concatenate(out) if out else np.zeros(0)

    def face_quality(self, images) -> np.ndarray:
        """topiq_nr-face (0-1), one image at a time as the reference does (full frames in profile
        reference, face crops in paper: the caller chooses). NaN where facexlib finds no face;
        the reference code then drops the whole video (its try/except), which is the caller's
        rule to apply."""
        images = _check_images(images)
        if self.resolved_mode == "proxy":
            return np.array([proxy.score(im) for im in images], dtype=np.float64)
        out = np.empty(len(images))
        for i, im in enumerate(images):
            try:
                out[i] = self._run(self.metric_models["face_quality"], [im])[0]
            except AssertionError as err:
                if _NO_FACE not in str(err):
                    raise
                out[i] = np.nan
        return out

    # ------------------------------------------------------------------ provenance
    def provenance(self) -> dict:
        """{"mode", "profile", "quality": {metric: description}, "weights": {...}}.

        A paper description names the pyiqa metric and version and the sha256 of each loaded file
        that can change its scores; a proxy description starts with "proxy:". Models not loaded
        yet are loaded (a checksum of a file never loaded would prove nothing)."""
        prov = {"mode": self.resolved_mode, "profile": self.profile}
        if self.resolved_mode == "proxy":
            prov["quality"] = {m: proxy.NAME for m in self.metric_models}
            prov["proxy_definition"] = proxy.DEFINITION
            return prov
        self.load()
        import pyiqa
        quality = {}
        for metric, name in self.metric_models.items():
            sums = " ".join(f"{f.name}:sha256:{self._weights[f.name]}"
                            for f in MODELS[name].files if f.affects_scores)
            quality[metric] = f"{name} pyiqa=={pyiqa.__version__} {sums}"
        prov["quality"] = quality
        prov["weights"] = {}
        for name in sorted(set(self.metric_models.values())):
            for f in MODELS[name].files:
                sha = self._weights[f.name]
                prov["weights"][f.name] = {
                    "model": name, "sha256": sha, "published_sha256_prefix": f.sha256_prefix,
                    "matches_published": None if not f.sha256_prefix
                    else sha.startswith(f.sha256_prefix)}
        return prov
