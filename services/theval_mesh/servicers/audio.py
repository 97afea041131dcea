"""theval.v1.AudioService over audio.backend (RMS envelope and Silero VAD)."""
import threading

from ..api.v1 import audio_pb2, audio_pb2_grpc, common_pb2
from ..audio.backend import AudioBackend
from ..common import telemetry
from ..common.errors import ServiceError
from ..common.status import rpc
from ..media.decode import MediaReader
from ..orchestrator.stages import analyse_audio
from . import wire
from .common import opened_video, servicer_service

SERVICE = audio_pb2.DESCRIPTOR.services_by_name["AudioService"].full_name


class AudioServicer(audio_pb2_grpc.AudioServiceServicer):
    def __init__(self, config):
        self.config = config
        self.backend = None
        self._lock = threading.Lock()  # Silero's ONNX wrapper keeps state between chunks: one at a time

    def load(self):
        self.backend = AudioBackend()
        self.backend.provenance()

    def _backend(self) -> AudioBackend:
        if self.backend is None:
            raise ServiceError("UNAVAILABLE", "the audio service is still loading Silero VAD")
        return self.backend

    @rpc
    def Analyse(self, request, context):
        backend = self._backend()
        with opened_video(request.video, self.config) as path:
            reader = MediaReader(path, self.config.limits)
            has_audio = reader.info.has_audio
            audio = reader.read_audio()
            with self._lock, telemetry.timed(telemetry.INFERENCE.labels("audio", "silero-vad")):
                series = analyse_audio(backend, audio)
        return wire.audio_to_proto(series, has_audio, audio_pb2.AudioResponse())

    @rpc
    def Describe(self, request, context):
        return common_pb2.DescribeResponse(backend=self._backend().provenance())


def register(config):
    servicer = AudioServicer(config)
    return servicer_service(servicer, audio_pb2_grpc.add_AudioServiceServicer_to_server, SERVICE, load=servicer.load)
