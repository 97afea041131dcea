"""theval.v1.HeadPoseService over backends.headpose.backend (rigid fit of the FaceMesh landmarks)."""
import numpy as np

from theval_mesh.backends import liveness
from theval_mesh.backends.headpose.backend import BACKEND, estimate
from theval_mesh.pure.errors import UserError
from theval_mesh.rpc import telemetry, wire
from theval_mesh.rpc.servicers.common import request_limit, servicer_service
from theval_mesh.rpc.status import rpc
from theval_mesh.rpc.v1 import common_pb2, headpose_pb2, headpose_pb2_grpc

SERVICE = headpose_pb2.DESCRIPTOR.services_by_name["HeadPoseService"].full_name


class HeadPoseServicer(headpose_pb2_grpc.HeadPoseServiceServicer):
    @rpc
    def Estimate(self, request, context):
        if request.width <= 0 or request.height <= 0:
            raise UserError(f"width and height must be positive, not {request.width}x{request.height}")
        try:
            points = wire.points_from_proto(request, "points", request.num_points)
        except ValueError as err:
            raise UserError(f"points: {err}") from None
        with telemetry.timed(telemetry.INFERENCE.labels("headpose", BACKEND)):
            try:
                pose = estimate(points, request.width, request.height, liveness.of_call(context))
            except np.linalg.LinAlgError:  # finite, but no face shape (e.g. every point in one place)
                raise UserError("points: the rigid fit cannot align these landmarks (degenerate face shape)") from None
        telemetry.FRAMES.labels("headpose").inc(len(points))
        return wire.pose_to_proto(pose, headpose_pb2.HeadPoseResponse())

    @rpc
    def Describe(self, request, context):
        return common_pb2.DescribeResponse(backend=BACKEND)


def register(config):
    servicer = HeadPoseServicer()
    # One landmark series, no video.
    return servicer_service(servicer, headpose_pb2_grpc.add_HeadPoseServiceServicer_to_server, SERVICE, load=None,
                            receive_limit=request_limit(config, video=False, series=1))
