"""Errors to gRPC status codes, one line of detail each (DESIGN.md "Contracts")."""
import functools
import logging

import grpc

from ..scoring.errors import ScoringError
from .errors import (
    AccessDenied,
    AlreadyExists,
    InputTooLarge,
    NotFound,
    ServiceError,
    UserError,
    VideoError,
    WeightsMissing,
)

log = logging.getLogger("theval.status")

# Most specific first.
CODES = (
    (ServiceError, None),  # its own code
    (InputTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (VideoError, grpc.StatusCode.INVALID_ARGUMENT),
    (AccessDenied, grpc.StatusCode.PERMISSION_DENIED),
    (WeightsMissing, grpc.StatusCode.FAILED_PRECONDITION),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (ScoringError, grpc.StatusCode.FAILED_PRECONDITION),  # e.g. GT and video scored differently
    (UserError, grpc.StatusCode.INVALID_ARGUMENT),
)


def status_of(err: BaseException) -> tuple[grpc.StatusCode, str]:
    for kind, code in CODES:
        if isinstance(err, kind):
            if isinstance(err, ServiceError):
                return grpc.StatusCode[err.code], str(err)
            detail = err.reason if isinstance(err, VideoError) else str(err)
            return code, detail
    return grpc.StatusCode.INTERNAL, f"internal error: {type(err).__name__}: {err}"


def rpc(method):
    """Servicer method decorator: a raised error becomes its status code and detail."""
    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except Exception as err:  # noqa: BLE001 - every error must reach the caller as a status
            if context.code() is not None and context.code() != grpc.StatusCode.OK:
                raise  # already aborted with a code
            code, detail = status_of(err)
            if code == grpc.StatusCode.INTERNAL:
                log.exception("%s failed", method.__name__)
            context.abort(code, detail)
    return wrapper


def error_from_rpc(err: grpc.RpcError, service: str, address: str, path: str) -> Exception:
    """An error returned by a mesh service, as the local exception the composition expects:
    the video's own faults stay video faults, the rest are the mesh's (ServiceError)."""
    code, detail = err.code(), err.details() or ""
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return VideoError(path, detail)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return InputTooLarge(path, detail)
    if code == grpc.StatusCode.UNAVAILABLE:
        return ServiceError(code.name, f"the {service} service at {address} is unavailable: {detail}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ServiceError(code.name, f"the {service} service at {address} did not answer in time")
    return ServiceError(code.name, f"{service} service: {detail}")
