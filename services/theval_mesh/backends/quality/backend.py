"""Quality backend: the paper's pyiqa models (in-process from the weights store, or on a Triton
server), or a labelled training-free proxy.

Inputs are RGB uint8 arrays (H x W x 3). Scores: higher = better.
"""
import numpy as np

from theval_mesh.backends.quality import proxy
from theval_mesh.backends.quality.local_models import LocalModels
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import METRIC_MODELS, MODELS
from theval_mesh.pure.errors import UserError, WeightsMissing
from theval_mesh.pure.metrics.quality import FRAME_BATCH, MOUTH_BATCH, batches, pad_to_batch
from theval_mesh.pure.metrics.registry import FACE_QUALITY, GLOBAL_AESTHETIC, MOUTH_QUALITY
from theval_mesh.pure.settings import QUALITY_MODES


def _check_images(images) -> list[np.ndarray]:
    images = list(images)
    for im in images:
        if not (isinstance(im, np.ndarray) and im.dtype == np.uint8 and im.ndim == 3
                and im.shape[2] == 3 and im.shape[0] > 0 and im.shape[1] > 0):
            raise ValueError("quality backend takes RGB uint8 arrays of shape (H, W, 3), got "
                             f"{getattr(im, 'dtype', type(im))} {getattr(im, 'shape', '')}")
    return images


class QualityBackend:
    """mode: "paper" (pyiqa models; WeightsMissing if they cannot run), "proxy" (training-free,
    see proxy.py) or "auto" (paper when every model can run, else proxy; `.notice` says which
    and why). profile: "reference" (musiq for mouths) or "paper" (musiq-spaq).
    models: where the pyiqa models run: LocalModels (default: in-process, from `store`) or
    rpc.triton.client.TritonModels. Models load once, on first use or on `load()`.
    inference: pure.inference.InferenceOptions, how LocalModels runs them (runtime, device,
    precision; default auto)."""

    def __init__(self, mode: str = "auto", profile: str = "reference", store=None,
                 inference=None, models=None):
        if mode not in QUALITY_MODES:
            raise UserError(f"quality mode must be one of {', '.join(QUALITY_MODES)}, not {mode!r}")
        if profile not in METRIC_MODELS:
            raise UserError(f"profile must be one of {', '.join(METRIC_MODELS)}, not {profile!r}")
        self.mode, self.profile = mode, profile
        self.store = ws.resolve(store)
        self.models = models if models is not None else LocalModels(self.store, inference)
        self.metric_models = dict(METRIC_MODELS[profile])
        names = sorted(set(self.metric_models.values()))
        problem = None if mode == "proxy" else self.models.unavailable(names)
        if mode == "paper" and problem:
            raise WeightsMissing(problem)
        self.resolved_mode = "proxy" if mode == "proxy" or problem else "paper"
        where = "" if self.models.served_by == "in-process" else f", served by {self.models.served_by}"
        if self.resolved_mode == "paper":
            why = "requested" if mode == "paper" else "all weights found"
            self.notice = f"quality: paper models {', '.join(names)} ({why}{where})"
        elif mode == "proxy":
            self.notice = f"quality: {proxy.NAME} (requested)"
        else:
            self.notice = f"quality: {proxy.NAME} stands in for {', '.join(names)}: {problem}"

    def load(self) -> None:
        """Load every model now (servers call this before reporting SERVING)."""
        if self.resolved_mode == "paper":
            for name in sorted(set(self.metric_models.values())):
                self.models.load(name)

    def _scores(self, metric: str, images, each: bool = False) -> np.ndarray:
        return self.models.scores(self.metric_models[metric], images, each)

    # ------------------------------------------------------------------ metrics
    def global_aesthetic(self, frames) -> np.ndarray:
        """topiq_iaa (1-10) per full frame, in batches of 64."""
        frames = _check_images(frames)
        if self.resolved_mode == "proxy":
            return np.array([proxy.score(f) for f in frames], dtype=np.float64)
        out = [self._scores(GLOBAL_AESTHETIC.key, batch) for batch in batches(frames, FRAME_BATCH)]
        return np.concatenate(out) if out else np.zeros(0)

    def frame_batch(self) -> int:
        """Full frames (and faces) per call: the models' batches of 64. The proxy rates each image
        alone, so it takes them as they come: a burst of 64 frames every 64 would fill the frame
        pass's queue and stall its other stages meanwhile. Mouth crops are batched in both modes:
        the batch's padding is part of their score."""
        return 1 if self.resolved_mode == "proxy" else FRAME_BATCH

    def kept_frame(self, frame: np.ndarray) -> np.ndarray:
        """A frame as it waits for its batch: the proxy only ever looks at it scaled down, so
        that is all it keeps (64 frames of 4096x4096 would otherwise wait as 3.2 GB)."""
        return proxy.scaled(frame) if self.resolved_mode == "proxy" else frame

    def full_frames(self, frames) -> tuple[np.ndarray, np.ndarray]:
        """Global aesthetic and face quality of the same full frames (profile reference, which
        scores face quality on full frames). The proxy rates an image once, so each frame is
        scored once and both columns carry the same numbers."""
        if self.resolved_mode == "proxy":
            scores = self.global_aesthetic(frames)
            return scores, scores
        return self.global_aesthetic(frames), self.face_quality(frames)

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
                out.append(self._scores(MOUTH_QUALITY.key, list(padded)))
        return np.concatenate(out) if out else np.zeros(0)

    def face_quality(self, images) -> np.ndarray:
        """topiq_nr-face (0-1), one image at a time as the reference does (full frames in profile
        reference, face crops in paper: the caller chooses). Both profiles score with the GFIQA
        checkpoint that the reference's pyiqa 0.1.13 loads for topiq_nr-face (not the installed
        pyiqa's CGFIQA), after aligning the face with facexlib. NaN where facexlib finds no face;
        the reference code then drops the whole video (its try/except), which is the caller's
        rule to apply."""
        images = _check_images(images)
        if self.resolved_mode == "proxy":
            return np.array([proxy.score(im) for im in images], dtype=np.float64)
        return self._scores(FACE_QUALITY.key, images, each=True) if images else np.zeros(0)

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
        names = sorted(set(self.metric_models.values()))
        described = {name: self.models.describe(name) for name in names}
        quality = {}
        for metric, name in self.metric_models.items():
            files = described[name]["files"]
            sums = " ".join(f"{f.name}:sha256:{files[f.name]}" for f in MODELS[name].files if f.affects_scores)
            quality[metric] = f"{name} pyiqa=={described[name]['pyiqa']} {sums}"
            seeds = set((described[name].get("stand_in") or {}).values())
            if seeds:  # named first-class: these numbers must never pass for the model's
                quality[metric] += " weights: " + ",".join(ws.stand_in_label(s) for s in sorted(seeds))
        prov["quality"] = quality
        prov["served_by"] = self.models.served_by
        prov["inference"] = self.models.inference(names)
        prov["weights"] = {}
        for name in names:
            for f in MODELS[name].files:
                sha = described[name]["files"][f.name]
                prov["weights"][f.name] = {
                    "model": name, "sha256": sha, "published_sha256_prefix": f.sha256_prefix,
                    "matches_published": None if not f.sha256_prefix
                    else sha.startswith(f.sha256_prefix),
                    "stand_in_seed": (described[name].get("stand_in") or {}).get(f.name)}
        return prov
