"""theval.v1.AudioService over backends.audio.backend (RMS envelope, and Silero VAD in-process or on
Triton with --backend triton)."""
import json

from theval_mesh.backends import liveness
from theval_mesh.backends.audio.backend import AudioBackend
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.stages import analyse_audio
from theval_mesh.pure.errors import ServiceError, UserError
from theval_mesh.pure.metrics.profiles import PROFILES, REFERENCE
from theval_mesh.rpc import telemetry, wire
from theval_mesh.rpc.memory_budget import analyse_bytes
from theval_mesh.rpc.servicers.common import (
    LeafMemory,
    opened_video,
    request_limit,
    servicer_service,
    triton_client,
    until_triton_answers,
)
from theval_mesh.rpc.status import rpc
from theval_mesh.rpc.v1 import audio_pb2, audio_pb2_grpc, common_pb2

SERVICE = audio_pb2.DESCRIPTOR.services_by_name["AudioService"].full_name


class AudioServicer(audio_pb2_grpc.AudioServiceServicer):
    def __init__(self, config):
        self.config = config
        self.backend = None
        self.triton = triton_client(config)
        self.memory = LeafMemory(config)

    def load(self):
        if self.triton is None:
            backend = AudioBackend()
            backend.provenance()
        else:
            from theval_mesh.rpc.triton.client import TritonVad
            backend = AudioBackend(vad=TritonVad(self.triton))
            until_triton_answers(backend.provenance, self.triton.url)
        self.backend = backend

    def readiness(self):
        """With --backend triton: NOT_SERVING while Triton cannot serve the VAD model."""
        from theval_mesh.rpc.triton.repository import VAD_MODEL
        return self.triton.ready([VAD_MODEL])

    def _backend(self) -> AudioBackend:
        if self.backend is None:
            raise ServiceError("UNAVAILABLE", "the audio service is still loading Silero VAD")
        return self.backend

    @rpc
    def Analyse(self, request, context):
        backend = self._backend()
        with opened_video(request.video, self.config) as path:
            profile = request.profile or REFERENCE
            if profile not in PROFILES:
                raise UserError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
            reader = MediaReader(path, self.config.limits, reference_audio=profile == REFERENCE)
            has_audio = reader.info.has_audio
            self.memory.reserve(analyse_bytes(reader.info, self.config.run), path, context)
            cancelled = liveness.of_call(context)
            audio = reader.read_audio(cancelled)
            with telemetry.timed(telemetry.INFERENCE.labels("audio", "silero-vad")):
                series = analyse_audio(backend, audio, profile, cancelled)
        return wire.audio_to_proto(series, has_audio, audio_pb2.AudioResponse())

    @rpc
    def Describe(self, request, context):
        backend = self._backend()
        return common_pb2.DescribeResponse(backend=backend.provenance(),
                                           provenance_json=json.dumps({"served_by": backend.vad.served_by}))


def register(config):
    servicer = AudioServicer(config)
    return servicer_service(servicer, audio_pb2_grpc.add_AudioServiceServicer_to_server, SERVICE, load=servicer.load,
                            readiness=servicer.readiness if servicer.triton else None,
                            receive_limit=request_limit(config, video=True))  # the video only
