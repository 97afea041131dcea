"""The engine's interface over a running mesh: `theval evaluate --mesh HOST:PORT` scores each
video with the evaluator's Evaluate call instead of in-process, and writes the same files."""
import json
import os

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from theval_mesh.core.results import VideoResult
from theval_mesh.pure.errors import Cancelled, ServiceError, UsageRefused, UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.admission import is_busy
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc

READY_TIMEOUT_S = 10.0
DESCRIBE_TIMEOUT_S = 60.0  # the services answer from what they loaded at start-up
CANCEL_POLL_S = 0.1  # how often a call waits before it looks at `cancelled` again


class MeshEngine:
    """score_video() like Engine's, through the evaluator; thread-safe."""

    def __init__(self, address: str, settings: RunSettings, timeout_s: float = 3600.0,
                 security: ClientSecurity | None = None):
        """security: TLS and the token; default from THEVAL_TLS_CA, THEVAL_TOKEN, ... (rpc.security)."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise UsageRefused(f"--mesh {address!r}: expected HOST:PORT of the evaluator, e.g. 127.0.0.1:50051")
        self.address, self.settings, self.timeout_s = address, settings, timeout_s
        self.channel = client_channel(address, security or ClientSecurity.from_env(),
                                      options=[("grpc.max_receive_message_length", 64 << 20)])
        self.stub = evaluator_pb2_grpc.EvaluatorServiceStub(self.channel)
        self._check_serving()

    def _check_serving(self):
        try:
            status = health_pb2_grpc.HealthStub(self.channel).Check(
                health_pb2.HealthCheckRequest(), timeout=READY_TIMEOUT_S, wait_for_ready=True).status
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise UserError(f"the evaluator at {self.address} needs a token: set THEVAL_TOKEN (or "
                                "THEVAL_TOKEN_FILE)") from None
            raise UserError(f"no evaluator answers at {self.address} ({err.code().name}): start the mesh "
                            "with `theval mesh up`") from None
        if status != health_pb2.HealthCheckResponse.SERVING:
            raise UserError(f"the evaluator at {self.address} is not serving yet (models loading, or a service "
                            "it needs is down): see the `theval mesh up` output")

    def provenance(self) -> dict:
        """What results scored with these settings will say of their backends (the evaluator's
        Describe). UserError with the services' own line when they cannot serve these settings
        (FAILED_PRECONDITION: e.g. --headpose facexformer of a head-pose service serving the rigid
        fit) or cannot say: a run that could not score a single video stops before it starts."""
        request = common_pb2.DescribeRequest(settings=wire.settings_to_proto(self.settings))
        try:
            return json.loads(self.stub.Describe(request, timeout=DESCRIBE_TIMEOUT_S).provenance_json)
        except grpc.RpcError as err:
            raise UserError(f"the mesh at {self.address} cannot score with these settings "
                            f"({err.code().name}): {err.details()}") from None

    def score_video(self, path, model: str = "", on_frames=None, cancelled=None) -> VideoResult:
        """cancelled: backends.liveness; once it fires, the call is cancelled (the evaluator stops
        its work) and Cancelled raised."""
        # The evaluator reads the file itself: its allowed roots must include it.
        uri = os.path.abspath(path)
        request = evaluator_pb2.EvaluateRequest(video=common_pb2.VideoRef(uri=uri), name=str(path), model=model,
                                                settings=wire.settings_to_proto(self.settings))
        try:
            response = self._evaluate(request, cancelled)
            result = wire.result_from_proto(response.result)
        except grpc.RpcError as err:
            result = wire.failed_result(err)
            if is_busy(err):  # all its workers in use: transient, unlike an input over a limit
                raise ServiceError("UNAVAILABLE", f"the evaluator at {self.address} is busy: {err.details()}") from None
            if result is None:  # the mesh failed, not the video: retried, never recorded as the video's fault
                raise ServiceError(err.code().name, f"the mesh at {self.address} could not score {path}: "
                                   f"{err.details()}") from None
            if result.reason:  # name the file as the user did, not as the server resolved it
                result.reason = result.reason.replace(os.path.realpath(path), str(path))
        if on_frames:
            on_frames(result.frames_total)
        return result

    def _evaluate(self, request, cancelled):
        if cancelled is None:
            return self.stub.Evaluate(request, timeout=self.timeout_s)
        call = self.stub.Evaluate.future(request, timeout=self.timeout_s)
        while True:
            try:
                return call.result(timeout=CANCEL_POLL_S)
            except grpc.FutureTimeoutError:
                if code := cancelled():
                    call.cancel()  # the evaluator sees its call end and stops the video's work
                    raise Cancelled(code) from None

    def close(self):
        self.channel.close()
