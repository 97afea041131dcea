"""The evaluator's status codes as the project's exceptions, with the server's detail: the
inverse of rpc.status.CODES, for the Client's callers."""
import grpc

from theval_mesh.pure.errors import (
    AccessDenied,
    AlreadyExists,
    InputTooLarge,
    NotFound,
    Overloaded,
    ServiceError,
    UserError,
)
from theval_mesh.rpc.admission import is_busy

C = grpc.StatusCode
# Codes that blame the request: the detail says what to change.
REQUEST_ERRORS = {
    C.INVALID_ARGUMENT: UserError,     # a bad request (settings, name); a bad video comes back as a failed result
    C.FAILED_PRECONDITION: UserError,  # missing model weights, or a video scored unlike the GT set
    C.PERMISSION_DENIED: AccessDenied,
    C.NOT_FOUND: NotFound,
    C.ALREADY_EXISTS: AlreadyExists,
}


def error_from_rpc(err: grpc.RpcError, address: str, video: str | None = None) -> Exception:
    """The exception for a failed call to the evaluator at `address`; `video`: the label of the
    video the call sent (RESOURCE_EXHAUSTED is then the video over a limit, else a limit of jobs).
    The mesh's own failures (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ...) are ServiceErrors."""
    code, detail = err.code(), err.details() or err.code().name
    if is_busy(err):
        return Overloaded(f"the evaluator at {address} is busy: {detail}")
    if code == C.RESOURCE_EXHAUSTED:
        return InputTooLarge(video, detail) if video is not None else Overloaded(detail)
    if code == C.UNAUTHENTICATED:
        return UserError(f"the evaluator at {address} refused the call ({detail}): give the Client a token= "
                         "(or set THEVAL_TOKEN)")
    if code in REQUEST_ERRORS:
        return REQUEST_ERRORS[code](detail)
    return ServiceError(code.name, f"the evaluator at {address}: {detail}")
