"""Admission control of a mesh server: API calls beyond what its worker threads can run are
refused at once (RESOURCE_EXHAUSTED), never queued behind busy threads; streaming calls have a
smaller limit of their own, a smaller one again per caller (a token's identity: one caller cannot
hold every stream) and a maximum lifetime; health checks and reflection never wait for the API.

The server's thread pool has `workers` threads for API calls plus RESERVED_THREADS that API
calls never hold: they answer health checks and reflection, and refuse the calls over a limit.
"""
import threading
import time

import grpc

from theval_mesh.rpc.protocol import BUSY

RESERVED_THREADS = 4
CONTROL = ("/grpc.health.v1.Health/", "/grpc.reflection.")  # not API calls: never counted
CONTROL_STREAMS = RESERVED_THREADS // 2  # reflection streams open at once: the rest stay for health


def is_busy(err: grpc.RpcError) -> bool:
    """A refusal by admission control: worth retrying later, unlike an input over a limit."""
    return err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and \
        any(key == BUSY for key, _ in (err.trailing_metadata() or ()))


def stream_too_old(max_s: float) -> str:
    return (f"this stream was open for {max_s:g} s, the longest allowed (THEVAL_STREAM_MAX_S): "
            "open a new one for the rest")


class AdmissionInterceptor(grpc.ServerInterceptor):
    def __init__(self, service: str, workers: int, streams: int, stream_max_s: float, tokens=None,
                 caller_streams: int | None = None):
        """tokens (rpc.security.Tokens) tell a call's caller: each may hold caller_streams of the
        streams. Without tokens every caller is the same one: the streams limit it."""
        self.stream_max_s, self.tokens = stream_max_s, tokens
        self.caller_streams = caller_streams or streams
        self._callers: dict[str, threading.BoundedSemaphore] = {}  # identity -> its streams (tokens: finite)
        self._lock = threading.Lock()
        self.caller_busy = (f"{self.caller_streams} of your streaming calls are open on {service}, the most one "
                            "caller may have (THEVAL_STREAM_LIMIT_PER_CALLER); end one first")
        busy = f"{service} is busy: "
        self.calls = (threading.BoundedSemaphore(workers),
                      busy + f"its {workers} workers are all serving calls (THEVAL_WORKERS); retry later")
        self.streams = (threading.BoundedSemaphore(streams),
                        busy + f"{streams} streaming calls are open, its limit (THEVAL_STREAM_LIMIT); retry later")
        self.control = (threading.BoundedSemaphore(CONTROL_STREAMS),
                        busy + f"{CONTROL_STREAMS} reflection streams are open already; retry later")

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None
        streaming = handler.request_streaming or handler.response_streaming
        if details.method.startswith(CONTROL):
            # Health's Watch answers through a callback and holds no thread: nothing to limit.
            if not streaming or getattr(handler.unary_stream, "experimental_non_blocking", False):
                return handler
            return _wrap(handler, [self.control], None)
        if streaming:
            return _wrap(handler, self._caller(details) + [self.streams, self.calls], self.stream_max_s)
        return _wrap(handler, [self.calls], None)

    def _caller(self, details) -> list:
        """The gate of the caller's own streams ([] on a server without tokens)."""
        identity = self.tokens.identity(details.invocation_metadata) if self.tokens else None
        if identity is None:
            return []
        with self._lock:
            semaphore = self._callers.setdefault(identity, threading.BoundedSemaphore(self.caller_streams))
        return [(semaphore, self.caller_busy)]


def _admit(gates, context) -> list:
    """Take every gate's semaphore, or none and refuse the call."""
    taken = []
    for semaphore, why in gates:
        if not semaphore.acquire(blocking=False):
            for s in taken:
                s.release()
            context.set_trailing_metadata(((BUSY, "1"),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, why)
        taken.append(semaphore)
    return taken


def _wrap(handler, gates, max_s):
    """The handler, admitted in its worker thread (a call cancelled before it runs takes nothing);
    a response stream ends (DEADLINE_EXCEEDED) at its first message after max_s."""
    def unary(behavior):
        def wrapped(request, context):
            taken = _admit(gates, context)
            try:
                return behavior(request, context)
            finally:
                for s in taken:
                    s.release()
        return wrapped

    def streaming(behavior):
        def wrapped(request, context):
            taken = _admit(gates, context)
            end = time.monotonic() + max_s if max_s else None
            try:
                for response in behavior(request, context):
                    yield response
                    if end is not None and time.monotonic() > end:
                        context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, stream_too_old(max_s))
            finally:
                for s in taken:
                    s.release()
        return wrapped

    args = (handler.request_deserializer, handler.response_serializer)
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), *args)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), *args)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming(handler.unary_stream), *args)
    return grpc.stream_stream_rpc_method_handler(streaming(handler.stream_stream), *args)
