"""The python-backend models of the Triton repository (triton_models/<model>/1/model.py names
one of these classes). They run inside Triton's python stub, the only place where
triton_python_backend_utils exists, and score with the same functions as the in-process
backends (backends.quality.inference, backends.audio.backend, backends.headpose.facexformer), so
both paths give the same numbers.

Every model also answers PROVENANCE: a JSON string with what it loaded (pyiqa version and the
sha256 of each weight file, or the VAD model's checksum) and where it runs. A request that asks
for PROVENANCE alone is answered without running the network.
"""
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

from theval_mesh.backends.audio.backend import LocalVad
from theval_mesh.backends.headpose import facexformer
from theval_mesh.backends.quality.local_models import LocalModels, missing_weights_reason
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import MODELS
from theval_mesh.pure.inference import InferenceOptions


def _parameters(args) -> dict:
    config = json.loads(args["model_config"])
    return {k: v["string_value"] for k, v in config.get("parameters", {}).items()}


def _device(args) -> str:
    if args.get("model_instance_kind") == "GPU":
        return f"cuda:{args.get('model_instance_device_id', 0)}"
    return "cpu"


def _set_threads(params):
    """torch threads of this instance: the config's torch_threads, else every core (torch's own
    default is the physical cores, half of them on a hyper-threaded VM)."""
    import torch
    torch.set_num_threads(int(params.get("torch_threads") or 0) or os.cpu_count() or 1)


def _wants(request, name: str) -> bool:
    return name in request.requested_output_names()


def _provenance(text: str, n: int):
    return pb_utils.Tensor("PROVENANCE", np.array([[text.encode()]] * n, dtype=np.object_))


def _error(model: str, err: Exception):
    return pb_utils.InferenceResponse(
        error=pb_utils.TritonError(f"{model}: {type(err).__name__}: {err}"))


class QualityTritonModel:
    """A pyiqa quality model. IMAGES: uint8 [batch, H, W, 3] RGB; SCORES: float32 [batch, 1]."""

    def initialize(self, args):
        params = _parameters(args)
        self.name = args["model_name"]
        self.pyiqa = MODELS[params["pyiqa_metric"]].name
        self.each = params.get("score_each") == "true"
        store = ws.resolve(params.get("weights_store") or None)  # "" -> $THEVAL_WEIGHTS or default
        missing = ws.missing_files(store, [self.pyiqa])
        if missing:  # Triton marks the model UNAVAILABLE with this reason; the others load
            message = f"{self.name} not loaded: {missing_weights_reason(store, missing)}"
            pb_utils.Logger.log_error(message)
            raise pb_utils.TritonModelException(message)
        _set_threads(params)
        device = _device(args)
        self.models = LocalModels(store, InferenceOptions(device=device))
        self.models.load(self.pyiqa)
        self.provenance = json.dumps({**self.models.describe(self.pyiqa), "model": self.pyiqa,
                                      "device": device, "triton_model": self.name,
                                      "inference": self.models.inference([self.pyiqa])}, sort_keys=True)
        pb_utils.Logger.log_info(f"{self.name}: {self.pyiqa} loaded from {store} on {device}")

    def execute(self, requests):
        responses = [None] * len(requests)
        groups: dict = {}  # image shape -> [(request index, images)]: one forward pass per shape
        for i, request in enumerate(requests):
            images = pb_utils.get_input_tensor_by_name(request, "IMAGES").as_numpy()
            if _wants(request, "SCORES"):
                groups.setdefault(images.shape[1:], []).append((i, images))
            else:
                responses[i] = pb_utils.InferenceResponse([_provenance(self.provenance, len(images))])
        for members in groups.values():
            try:
                batch = [im for _, images in members for im in images]
                scores = self.models.scores(self.pyiqa, batch, self.each).astype(np.float32)
            except Exception as err:  # noqa: BLE001 - the requests of this group fail, not the model
                for i, _ in members:
                    responses[i] = _error(self.name, err)
                continue
            at = 0
            for i, images in members:
                n = len(images)
                responses[i] = pb_utils.InferenceResponse([
                    pb_utils.Tensor("SCORES", scores[at:at + n].reshape(n, 1)),
                    _provenance(self.provenance, n)])
                at += n
        return responses


class VadTritonModel:
    """Silero VAD. AUDIO: float32 [batch, samples] at 16 kHz; PROBS: float32 [batch, windows],
    the speech probability of each 512-sample window. All the audios of one execution run as
    one batch (backends.audio.backend.speech_probabilities)."""

    def initialize(self, args):
        params = _parameters(args)
        _set_threads(params)
        self.name = args["model_name"]
        self.vad = LocalVad()
        self.provenance = json.dumps({"vad": self.vad.provenance(), "device": "cpu",
                                      "triton_model": self.name}, sort_keys=True)
        pb_utils.Logger.log_info(f"{self.name}: {self.vad.provenance()} loaded")

    def execute(self, requests):
        waves, owners, responses = [], [], [None] * len(requests)
        for i, request in enumerate(requests):
            audio = pb_utils.get_input_tensor_by_name(request, "AUDIO").as_numpy()
            if _wants(request, "PROBS"):
                waves.extend(np.asarray(row, np.float32) for row in audio)
                owners.extend([i] * len(audio))
            else:
                responses[i] = pb_utils.InferenceResponse([_provenance(self.provenance, len(audio))])
        try:
            probs = self.vad.probabilities(waves)
        except Exception as err:  # noqa: BLE001
            return [r or _error(self.name, err) for r in responses]
        for i in sorted(set(owners)):
            rows = [p for p, owner in zip(probs, owners) if owner == i]
            responses[i] = pb_utils.InferenceResponse([
                pb_utils.Tensor("PROBS", np.stack(rows).astype(np.float32)),
                _provenance(self.provenance, len(rows))])
        return responses


class HeadPoseTritonModel:
    """FaceXFormer's head pose (backends.headpose.facexformer.LocalNetwork). CROPS: float32
    [batch, 3, 224, 224], face crops normalised as facexformer.normalised() does; DEGREES: float32
    [batch, 3] pitch, yaw, roll. The requests of one execution run as one batch (at most the
    reference's 128 crops: max_batch_size)."""

    def initialize(self, args):
        params = _parameters(args)
        self.name = args["model_name"]
        store = ws.resolve(params.get("weights_store") or None)
        missing = facexformer.missing(store, ("main",))
        if missing:  # UNAVAILABLE with this reason; the other models load
            message = (f"{self.name} not loaded: {', '.join(missing)} not in the weights store {store}; "
                       f"{ws.FETCH_HINT}")
            pb_utils.Logger.log_error(message)
            raise pb_utils.TritonModelException(message)
        _set_threads(params)
        device = _device(args)
        self.network = facexformer.LocalNetwork(store, InferenceOptions(device=device))
        # What the head-pose service's describe() needs: each file's checksum and stand-in seed.
        self.provenance = json.dumps({"files": self.network.files, "device": device, "triton_model": self.name,
                                      "inference": self.network.inference()}, sort_keys=True)
        pb_utils.Logger.log_info(f"{self.name}: FaceXFormer loaded from {store} on {device}")

    def execute(self, requests):
        responses, batches, owners = [None] * len(requests), [], []
        for i, request in enumerate(requests):
            crops = pb_utils.get_input_tensor_by_name(request, "CROPS").as_numpy()
            if _wants(request, "DEGREES"):
                batches.append(crops)
                owners.append(i)
            else:
                responses[i] = pb_utils.InferenceResponse([_provenance(self.provenance, len(crops))])
        if not batches:
            return responses
        try:
            degrees = self.network.degrees(np.ascontiguousarray(np.concatenate(batches), np.float32))
        except Exception as err:  # noqa: BLE001 - these requests fail, not the model
            return [r or _error(self.name, err) for r in responses]
        at = 0
        for i, crops in zip(owners, batches):
            n = len(crops)
            responses[i] = pb_utils.InferenceResponse([
                pb_utils.Tensor("DEGREES", degrees[at:at + n].astype(np.float32)), _provenance(self.provenance, n)])
            at += n
        return responses
