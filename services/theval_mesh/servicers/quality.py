"""theval.v1.QualityService over quality.backend (pyiqa models from the weights store, or the
labelled proxy), cropping with landmarks computed by the landmarks service."""
import json
import threading

from ..api.v1 import common_pb2, quality_pb2, quality_pb2_grpc
from ..common import telemetry
from ..common.errors import UserError
from ..common.status import rpc
from ..media.decode import MediaReader
from ..orchestrator.frame_pass import run_quality_pass
from ..quality import proxy
from ..quality.backend import QualityBackend
from . import wire
from .common import opened_video, run_settings, servicer_service

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
        return self._call("global_aesthetic", frames)

    def face_quality(self, images):
        return self._call("face_quality", images)

    def mouth_quality(self, crops):
        return self._call("mouth_quality", crops)


class QualityServicer(quality_pb2_grpc.QualityServiceServicer):
    def __init__(self, config):
        self.config = config
        self._backends: dict = {}  # (mode, profile) -> QualityBackend
        self._lock = threading.Lock()

    def backend(self, mode: str, profile: str) -> QualityBackend:
        """Built (and its models loaded) once per mode and profile. WeightsMissing when the
        store lacks what `mode` needs (FAILED_PRECONDITION)."""
        with self._lock:
            key = (mode, profile)
            if key not in self._backends:
                backend = QualityBackend(mode=mode, profile=profile, store=self.config.weights_store)
                backend.load()
                self._backends[key] = backend
            return self._backends[key]

    def load(self):
        """The configured mode and profile, before SERVING; missing weights keep NOT_SERVING."""
        self.backend(self.config.run.quality, self.config.run.profile)

    @rpc
    def Score(self, request, context):
        settings = run_settings(request.settings, self.config)
        backend = self.backend(settings.quality, settings.profile)
        try:
            landmarks = {m.pass_name: wire.landmarks_from_proto(m) for m in request.landmarks}
        except ValueError as err:
            raise UserError(str(err)) from None
        if "single" not in landmarks:
            raise UserError("landmarks: the \"single\" pass is required (its points place the crops)")
        with opened_video(request.video, self.config) as path:
            reader = MediaReader(path, settings.limits)
            series = run_quality_pass(reader, settings, _Timed(backend), landmarks)
        telemetry.FRAMES.labels("quality").inc(series.frame_count)
        out = quality_pb2.QualityResponse(frame_count=series.frame_count)
        for name in ("global_aesthetic", "face_quality", "mouth_quality"):
            wire.set_array(out, name, getattr(series, name))
        return out

    @rpc
    def Describe(self, request, context):
        settings = run_settings(request.settings, self.config)
        provenance = self.backend(settings.quality, settings.profile).provenance()
        return common_pb2.DescribeResponse(backend=provenance["mode"], provenance_json=json.dumps(provenance))


def register(config):
    servicer = QualityServicer(config)
    return servicer_service(servicer, quality_pb2_grpc.add_QualityServiceServicer_to_server, SERVICE, load=servicer.load)
