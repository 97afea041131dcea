"""theval.v1.LandmarksService over backends.landmarks.backend (MediaPipe FaceMesh), as the engine runs it."""
import numpy as np

from theval_mesh.backends import liveness
from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.landmarks.backend import BACKEND, FaceTracker
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.frame_pass import run_frame_pass
from theval_mesh.rpc import telemetry, wire
from theval_mesh.rpc.memory_budget import track_bytes
from theval_mesh.rpc.servicers.common import LeafMemory, opened_video, request_limit, run_settings, servicer_service
from theval_mesh.rpc.status import rpc
from theval_mesh.rpc.v1 import common_pb2, landmarks_pb2, landmarks_pb2_grpc

SERVICE = landmarks_pb2.DESCRIPTOR.services_by_name["LandmarksService"].full_name


class LandmarksServicer(landmarks_pb2_grpc.LandmarksServiceServicer):
    def __init__(self, config):
        self.config = config
        self.memory = LeafMemory(config)

    def load(self):
        """MediaPipe's models ship in its wheel; running one frame proves they load."""
        with FaceTracker(passes.SINGLE) as tracker:
            tracker.process(np.zeros((64, 64, 3), np.uint8))

    @rpc
    def Track(self, request, context):
        settings = run_settings(request.settings, self.config)
        silent = list(request.silent_frames) if request.silent_lip_pass else None
        with opened_video(request.video, self.config) as path:
            reader = MediaReader(path, settings.limits)
            self.memory.reserve(track_bytes(reader.info, settings, None if silent is None else len(silent)), path, context)
            with telemetry.timed(telemetry.INFERENCE.labels("landmarks", BACKEND)):
                # Frames counted as they go, so /metrics shows the work (and when it stops).
                series = run_frame_pass(reader, settings, None, silent_frames=silent,
                                        on_frames=telemetry.FRAMES.labels("landmarks").inc,
                                        cancelled=liveness.of_call(context))
        response = landmarks_pb2.TrackResponse(info=wire.info_to_proto(reader.info), frame_count=series.frame_count)
        for name in list(series.landmarks):  # each series goes once it is in the response: one copy at a time
            wire.landmarks_to_proto(name, series.landmarks.pop(name), into=response.series.add())
        return response

    @rpc
    def Describe(self, request, context):
        return common_pb2.DescribeResponse(backend=BACKEND)


def register(config):
    servicer = LandmarksServicer(config)
    # The video and the silent-lip pass's frame numbers.
    return servicer_service(servicer, landmarks_pb2_grpc.add_LandmarksServiceServicer_to_server, SERVICE, load=servicer.load,
                            receive_limit=request_limit(config, video=True, frame_lists=1))
