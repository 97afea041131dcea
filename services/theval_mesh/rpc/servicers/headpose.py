"""theval.v1.HeadPoseService: the rigid fit of FaceMesh landmarks (Estimate, always served) and,
when the service is started with it, the reference's estimator (EstimateVideo: FaceXFormer on
RetinaFace crops of the decoded frames, the network in-process or on Triton with --backend triton).

Which estimator the service serves is decided once, at start-up, from its --headpose setting
(THEVAL_HEADPOSE) and its weights store, as the embedded engine decides (facexformer.choose)."""
import json
import logging

import numpy as np

from theval_mesh.backends import liveness
from theval_mesh.backends.headpose import facexformer
from theval_mesh.backends.headpose.backend import BACKEND, RIGID_FIT, estimate
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.frame_pass import run_headpose_pass
from theval_mesh.pure.errors import NotServed, UserError, WeightsMissing
from theval_mesh.rpc import telemetry, wire
from theval_mesh.rpc.memory_budget import estimate_bytes, estimate_video_bytes
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
from theval_mesh.rpc.v1 import common_pb2, headpose_pb2, headpose_pb2_grpc

log = logging.getLogger("theval.headpose")
SERVICE = headpose_pb2.DESCRIPTOR.services_by_name["HeadPoseService"].full_name
FIX = ("start the head-pose service with --headpose facexformer (or THEVAL_HEADPOSE=facexformer) and FaceXFormer's "
       "weights in its --weights-store (`theval weights fetch --model facexformer`), "
       "or score with --headpose rigid-fit")


class HeadPoseServicer(headpose_pb2_grpc.HeadPoseServiceServicer):
    def __init__(self, config):
        self.config = config
        self.triton = None  # the Triton connection, made only for FaceXFormer (a rigid fit needs none)
        self.facexformer = None  # FaceXFormerHeadPose once loaded; None: the rigid fit only
        self.notice = ""
        self.memory = LeafMemory(config)

    def load(self):
        """FaceXFormer and its detector before SERVING when the configured mode resolves to it;
        `facexformer` without the weights keeps the service NOT_SERVING (WeightsMissing)."""
        on_triton = self.config.backend == "triton"
        roles = ("detector",) if on_triton else facexformer.ROLES  # on Triton, the network's file is Triton's
        use, self.notice = facexformer.choose(self.config.run.headpose, self.config.weights_store, roles)
        if use:
            self.triton = triton_client(self.config)
            if self.triton is None:
                self.facexformer = facexformer.FaceXFormerHeadPose(self.config.weights_store, self.config.inference)
            else:
                self.facexformer = until_triton_answers(self._on_triton, self.triton.url)
        log.info("%s%s", self.notice, f", served by {self.facexformer.served_by}" if self.facexformer else "")

    def _on_triton(self):
        """FaceXFormerHeadPose with the network on Triton once Triton has loaded it (ServiceError
        UNAVAILABLE meanwhile: until_triton_answers waits). A Triton that cannot load it (its store
        lacks model.pt) fails `facexformer` (NOT_SERVING, the reason logged) and turns `auto` into
        the rigid fit, as missing local weights do."""
        from theval_mesh.rpc.triton.client import TritonFaceXFormer
        network = TritonFaceXFormer(self.triton)
        why = network.unavailable()
        if why is None:
            return facexformer.FaceXFormerHeadPose(self.config.weights_store, self.config.inference, network=network)
        if self.config.run.headpose == facexformer.NAME:
            raise WeightsMissing(f"--headpose facexformer with --backend triton: {why}")
        self.notice = f"head pose: {RIGID_FIT} stands in for FaceXFormer ({why})"
        return None

    def readiness(self):
        """With --backend triton and FaceXFormer: NOT_SERVING while Triton cannot serve it."""
        if self.facexformer is None or self.triton is None:
            return True, ""
        from theval_mesh.rpc.triton.repository import FACEXFORMER_MODEL
        return self.triton.ready([FACEXFORMER_MODEL])

    def estimator(self, mode: str):
        """The FaceXFormerHeadPose a request's --headpose mode gets, None for the rigid fit;
        NotServed (FAILED_PRECONDITION) when it asks for FaceXFormer and this service has none."""
        if mode == "rigid-fit":
            return None
        if mode == facexformer.NAME and self.facexformer is None:
            raise NotServed(f"--headpose facexformer: this head-pose service serves {RIGID_FIT} only "
                            f"({self.notice}); {FIX}")
        return self.facexformer

    @rpc
    def Estimate(self, request, context):
        if request.width <= 0 or request.height <= 0:
            raise UserError(f"width and height must be positive, not {request.width}x{request.height}")
        try:
            points = wire.points_from_proto(request, "points", request.num_points)
        except ValueError as err:
            raise UserError(f"points: {err}") from None
        self.memory.reserve(estimate_bytes(len(points)), "the landmarks sent", context)
        with telemetry.timed(telemetry.INFERENCE.labels("headpose", BACKEND)):
            try:
                pose = estimate(points, request.width, request.height, liveness.of_call(context))
            except np.linalg.LinAlgError:  # finite, but no face shape (e.g. every point in one place)
                raise UserError("points: the rigid fit cannot align these landmarks (degenerate face shape)") from None
        telemetry.FRAMES.labels("headpose").inc(len(points))
        return wire.pose_to_proto(pose, headpose_pb2.HeadPoseResponse())

    @rpc
    def EstimateVideo(self, request, context):
        settings = run_settings(request.settings, self.config)
        if settings.headpose == "rigid-fit":
            raise UserError("EstimateVideo runs FaceXFormer: the rigid fit (--headpose rigid-fit) is Estimate's, "
                            "on the landmarks")
        backend = self.estimator(facexformer.NAME)  # auto asks this service for what it serves: FaceXFormer here
        with opened_video(request.video, self.config) as path:
            reader = MediaReader(path, settings.limits)  # the service's size limits apply while decoding
            self.memory.reserve(estimate_video_bytes(reader.info), path, context)
            with telemetry.timed(telemetry.INFERENCE.labels("headpose", facexformer.NAME)):
                series = run_headpose_pass(reader, settings, backend, on_frames=telemetry.FRAMES.labels("headpose").inc,
                                           cancelled=liveness.of_call(context))
        out = headpose_pb2.HeadPoseResponse(frame_count=series.frame_count)
        for column, name in enumerate(("pitch", "yaw", "roll", "cx", "cy")):
            wire.set_array(out, name, series.head_pose[:, column])
        return out

    @rpc
    def Describe(self, request, context):
        settings = run_settings(request.settings, self.config)
        backend = self.estimator(settings.headpose)
        if backend is None:
            return common_pb2.DescribeResponse(backend=BACKEND, provenance_json=json.dumps({"served_by": "in-process"}))
        return common_pb2.DescribeResponse(backend=backend.describe(),
                                           provenance_json=json.dumps({"served_by": backend.served_by,
                                                                       "inference": backend.inference()}))


def register(config):
    servicer = HeadPoseServicer(config)
    return servicer_service(servicer, headpose_pb2_grpc.add_HeadPoseServiceServicer_to_server, SERVICE,
                            load=servicer.load, readiness=servicer.readiness if config.backend == "triton" else None,
                            # The larger of Estimate's (one landmark series) and EstimateVideo's (the video):
                            # no request carries both.
                            receive_limit=max(request_limit(config, video=False, series=1),
                                              request_limit(config, video=True)))
