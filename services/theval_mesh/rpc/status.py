"""Errors to gRPC status codes, one line of detail each (docs/grpc-api.md, EvaluatorService)."""
import functools
import logging

import grpc

from theval_mesh.core.incidents import logged_internal
from theval_mesh.pure.errors import (
    AccessDenied,
    AlreadyExists,
    Cancelled,
    InputsRefused,
    InputTooLarge,
    NotFound,
    NotRanked,
    NotResumable,
    NotServed,
    Overloaded,
    ServiceError,
    UserError,
    VideoError,
    WeightsMissing,
    shorten,
)
from theval_mesh.pure.scoring.errors import ScoringError
from theval_mesh.rpc.admission import is_busy

log = logging.getLogger("theval.status")

# Most specific first.
CODES = (
    (ServiceError, None),  # its own code
    (Cancelled, None),  # its own code: CANCELLED or DEADLINE_EXCEEDED
    (InputTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (VideoError, grpc.StatusCode.INVALID_ARGUMENT),
    (AccessDenied, grpc.StatusCode.PERMISSION_DENIED),
    (WeightsMissing, grpc.StatusCode.FAILED_PRECONDITION),
    (NotServed, grpc.StatusCode.FAILED_PRECONDITION),
    (NotResumable, grpc.StatusCode.FAILED_PRECONDITION),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (ScoringError, grpc.StatusCode.FAILED_PRECONDITION),  # e.g. GT and video scored differently
    (InputsRefused, grpc.StatusCode.FAILED_PRECONDITION),  # e.g. no GT video has an audio track
    (NotRanked, grpc.StatusCode.FAILED_PRECONDITION),
    (UserError, grpc.StatusCode.INVALID_ARGUMENT),
)


def status_of(err: BaseException, where: str = "") -> tuple[grpc.StatusCode, str]:
    """The status code and detail (at most MAX_DETAIL characters) of an error; `where` names the
    call in the log line of an internal error."""
    for kind, code in CODES:
        if isinstance(err, kind):
            if isinstance(err, (ServiceError, Cancelled)):
                return grpc.StatusCode[err.code], shorten(str(err))
            detail = err.reason if isinstance(err, VideoError) else str(err)
            return code, shorten(detail)
    return grpc.StatusCode.INTERNAL, logged_internal(err, where)


def rpc(method):
    """Servicer method decorator: a raised error becomes its status code and detail."""
    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except Exception as err:  # every error must reach the caller as a status
            if context.code() is not None and context.code() != grpc.StatusCode.OK:
                raise  # already aborted with a code
            code, detail = status_of(err, method.__name__)  # logs an internal error
            if isinstance(err, Cancelled):  # no one reads the status: say it in the log
                log.info("%s stopped: %s", method.__name__, err)
            context.abort(code, detail)
    return wrapper


def error_from_rpc(err: grpc.RpcError, service: str, address: str, path: str) -> Exception:
    """An error returned by a mesh service, as the local exception the composition expects:
    the video's own faults stay video faults, the rest are the mesh's (ServiceError)."""
    code, detail = err.code(), err.details() or ""
    if is_busy(err):  # the mesh is short of workers: transient, not the video's fault
        return ServiceError("UNAVAILABLE", f"the {service} service at {address} stayed busy: {detail}")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return VideoError(path, detail)
    if code == grpc.StatusCode.INTERNAL:  # failed on this video (its log has the id): this video's failure
        return VideoError(path, f"the {service} service failed on it: {detail}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return InputTooLarge(path, detail)
    if code == grpc.StatusCode.UNAVAILABLE:
        return ServiceError(code.name, f"the {service} service at {address} is unavailable: {detail}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ServiceError(code.name, f"the {service} service at {address} did not answer in time")
    return ServiceError(code.name, f"{service} service: {detail}")
