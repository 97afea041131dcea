"""theval.v1.HeadPoseService over headpose.backend (rigid fit of the FaceMesh landmarks)."""
from ..api.v1 import common_pb2, headpose_pb2, headpose_pb2_grpc
from ..common import telemetry
from ..common.errors import UserError
from .common import servicer_service
from ..common.status import rpc
from ..headpose.backend import BACKEND, estimate
from . import wire

SERVICE = headpose_pb2.DESCRIPTOR.services_by_name["HeadPoseService"].full_name


class HeadPoseServicer(headpose_pb2_grpc.HeadPoseServiceServicer):
    @rpc
    def Estimate(self, request, context):
        points = wire.get_array(request, "points")
        n = request.num_points
        if n <= 0 or len(points) % (n * 3) or request.width <= 0 or request.height <= 0:
            raise UserError(f"expected positive width, height and num_points and frames x num_points x 3 "
                            f"floats; got {request.width}x{request.height}, num_points={n}, "
                            f"{len(points)} floats")
        points = points.reshape(-1, n, 3)
        with telemetry.timed(telemetry.INFERENCE.labels("headpose", BACKEND)):
            pose = estimate(points, request.width, request.height)
        telemetry.FRAMES.labels("headpose").inc(len(points))
        return wire.pose_to_proto(pose, headpose_pb2.HeadPoseResponse())

    @rpc
    def Describe(self, request, context):
        return common_pb2.DescribeResponse(backend=BACKEND)


def register(config):
    servicer = HeadPoseServicer()
    return servicer_service(servicer, headpose_pb2_grpc.add_HeadPoseServiceServicer_to_server, SERVICE, load=None)
