"""theval.v1.QualityService over backends.quality.backend (pyiqa models from the weights store, on a
Triton server with --backend triton, or the labelled proxy), cropping with landmarks computed by
the landmarks service."""
import json
import logging
import threading

from theval_mesh.backends import liveness
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.backends.quality import proxy
from theval_mesh.backends.quality.backend import QualityBackend
from theval_mesh.core.frame_pass import run_quality_pass
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.metrics.registry import FACE_QUALITY, GLOBAL_AESTHETIC, MOUTH_QUALITY, QUALITY, in_group
from theval_mesh.rpc import telemetry, wire
from theval_mesh.rpc.memory_budget import score_bytes
from theval_mesh.rpc.servicers.common import (
    LeafMemory,
    opened_video,
    request_limit,
    run_settings,
    servicer_service,
    triton_client,
    until_triton_answers,
)
from theval_mesh.rpc.status import rpc
from theval_mesh.rpc.v1 import common_pb2, quality_pb2, quality_pb2_grpc

log = logging.getLogger("theval.quality")
SERVICE = quality_pb2.DESCRIPTOR.services_by_name["QualityService"].full_name


class _Timed:
    """The backend's three scoring calls, timed by model for Prometheus."""

    def __init__(self, backend: QualityBackend):
        self.backend = backend

    def _model(self, metric: str) -> str:
        return proxy.NAME if self.backend.resolved_mode == "proxy" else self.backend.metric_models[metric]

    def _call(self, metric, images):
        with telemetry.timed(telemetry.INFERENCE.labels("quality", self._model(metric))):
            return getattr(self.backend, metric)(images)

    def global_aesthetic(self, frames):
        return self._call(GLOBAL_AESTHETIC.key, frames)

    def face_quality(self, images):
        return self._call(FACE_QUALITY.key, images)

    def mouth_quality(self, crops):
        return self._call(MOUTH_QUALITY.key, crops)

    def kept_frame(self, frame):
        return self.backend.kept_frame(frame)

    def frame_batch(self) -> int:
        return self.backend.frame_batch()

    def full_frames(self, frames):
        models = sorted({self._model(GLOBAL_AESTHETIC.key), self._model(FACE_QUALITY.key)})
        with telemetry.timed(telemetry.INFERENCE.labels("quality", "+".join(models))):
            return self.backend.full_frames(frames)


class QualityServicer(quality_pb2_grpc.QualityServiceServicer):
    def __init__(self, config):
        self.config = config
        self._backends: dict = {}  # (mode, profile) -> QualityBackend
        self._lock = threading.Lock()
        self.triton = triton_client(config)
        self.models = None  # where the pyiqa models run: None (in-process) or TritonModels
        if self.triton is not None:
            from theval_mesh.rpc.triton.client import TritonModels
            self.models = TritonModels(self.triton)
        self._triton_up = True
        self.memory = LeafMemory(config)

    def backend(self, mode: str, profile: str) -> QualityBackend:
        """Built (and its models loaded) once per mode and profile. WeightsMissing when the
        store lacks what `mode` needs (FAILED_PRECONDITION); ServiceError UNAVAILABLE while
        Triton does not answer."""
        with self._lock:
            key = (mode, profile)
            if key not in self._backends:
                backend = QualityBackend(mode=mode, profile=profile, store=self.config.weights_store,
                                         inference=self.config.inference, models=self.models)
                backend.load()
                self._backends[key] = backend
            return self._backends[key]

    def load(self):
        """The configured mode and profile, before SERVING; missing weights keep NOT_SERVING.
        With Triton, `auto` resolves once Triton answers: its models if it serves them all."""
        def load():
            backend = self.backend(self.config.run.quality, self.config.run.profile)
            log.info("%s", backend.notice)
        if self.triton is None:
            load()
        else:
            until_triton_answers(load, self.triton.url)

    def readiness(self):
        """With --backend triton: NOT_SERVING while Triton cannot serve the models in use."""
        with self._lock:
            names = {n for b in self._backends.values() if b.resolved_mode == "paper"
                     for n in b.metric_models.values()}
        if not names:
            return True, ""
        from theval_mesh.rpc.triton.repository import TRITON_NAME
        ok, why = self.triton.ready(sorted(TRITON_NAME[n] for n in names))
        if ok and not self._triton_up:
            self.models.forget()  # Triton came back: it may have loaded other weights
        self._triton_up = ok
        return ok, why

    @rpc
    def Score(self, request, context):
        settings = run_settings(request.settings, self.config)
        backend = self.backend(settings.quality, settings.profile)
        try:
            landmarks = wire.landmark_passes_from_proto(request.landmarks)
        except ValueError as err:
            raise UserError(str(err)) from None
        if "single" not in landmarks:
            raise UserError("landmarks: the \"single\" pass is required (its points place the crops)")
        with opened_video(request.video, self.config) as path:
            reader = MediaReader(path, settings.limits)
            self.memory.reserve(score_bytes(reader.info, settings, len(landmarks)), path, context)
            series = run_quality_pass(reader, settings, _Timed(backend), landmarks,
                                      on_frames=telemetry.FRAMES.labels("quality").inc,
                                      cancelled=liveness.of_call(context))
        out = quality_pb2.QualityResponse(frame_count=series.frame_count)
        for metric in in_group(QUALITY):
            wire.set_array(out, metric.key, getattr(series, metric.key))
        return out

    @rpc
    def Describe(self, request, context):
        settings = run_settings(request.settings, self.config)
        provenance = self.backend(settings.quality, settings.profile).provenance()
        return common_pb2.DescribeResponse(backend=provenance["mode"], provenance_json=json.dumps(provenance))


def register(config):
    servicer = QualityServicer(config)
    return servicer_service(servicer, quality_pb2_grpc.add_QualityServiceServicer_to_server, SERVICE, load=servicer.load,
                            readiness=servicer.readiness if servicer.triton else None,
                            # The video and two landmark series ("single", "mouth_quality").
                            receive_limit=request_limit(config, video=True, series=2))
