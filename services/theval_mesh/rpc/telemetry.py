"""Prometheus metrics of a mesh server, served on /metrics by its own HTTP port.

Every server counts its calls by method and status code, their latency and the calls in flight
(an interceptor, so no servicer can forget); the backends add frames processed and model time;
the evaluator adds videos scored by outcome, its stream queue and its dependencies' health.
"""
import time

import grpc
import prometheus_client as prom

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

REQUESTS = prom.Counter("theval_grpc_requests", "gRPC calls finished, by method and status code",
                        ["service", "method", "code"])
LATENCY = prom.Histogram("theval_grpc_request_seconds", "gRPC call latency, by method",
                         ["service", "method"], buckets=LATENCY_BUCKETS)
IN_FLIGHT = prom.Gauge("theval_grpc_in_flight_requests", "gRPC calls in progress, by method",
                       ["service", "method"])
FRAMES = prom.Counter("theval_frames_processed", "video frames decoded and processed", ["service"])
INFERENCE = prom.Histogram("theval_model_inference_seconds",
                           "time in a model per call (FaceMesh time includes decoding)",
                           ["service", "model"], buckets=LATENCY_BUCKETS)
VIDEOS = prom.Counter("theval_videos_scored", "videos the evaluator finished, by outcome "
                      "(ok, failed: a bad video, error: the mesh could not score it)", ["outcome"])
QUEUE = prom.Gauge("theval_evaluator_queue_depth", "videos received in streams and not yet started")
MEMORY_BUDGET = prom.Gauge("theval_memory_budget_bytes", "the evaluator's memory for videos in flight "
                           "(THEVAL_MEMORY_BUDGET_MB)")
MEMORY_RESERVED = prom.Gauge("theval_memory_reserved_bytes", "of the budget, what the videos in flight reserved")
DEPENDENCY_UP = prom.Gauge("theval_dependency_up", "1 when a service the evaluator needs is SERVING",
                           ["dependency"])


def start_http(host: str, port: int) -> tuple[object, int]:
    """Serve /metrics; returns (server, bound port)."""
    server, _ = prom.start_http_server(port, addr=host)
    return server, server.server_port


class timed:
    """with timed(INFERENCE.labels(...)): observe the block's wall time."""

    def __init__(self, histogram):
        self.histogram = histogram

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        self.histogram.observe(time.perf_counter() - self.start)


def _code(context, default: str) -> str:
    code = context.code()
    return code.name if code is not None else default


class MetricsInterceptor(grpc.ServerInterceptor):
    def __init__(self, service: str):
        self.service = service

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None
        method = details.method
        labels = (self.service, method)

        def begin():
            IN_FLIGHT.labels(*labels).inc()
            return time.perf_counter()

        def end(start, code):
            IN_FLIGHT.labels(*labels).dec()
            LATENCY.labels(*labels).observe(time.perf_counter() - start)
            REQUESTS.labels(self.service, method, code).inc()

        def unary(behavior):
            def wrapped(request, context):
                start, code = begin(), "UNKNOWN"
                try:
                    response = behavior(request, context)
                    code = _code(context, "OK")
                    return response
                except BaseException:
                    code = _code(context, "UNKNOWN")
                    raise
                finally:
                    end(start, code)
            return wrapped

        def streaming(behavior):
            def wrapped(request, context):
                start, code = begin(), "UNKNOWN"
                try:
                    yield from behavior(request, context)
                    code = _code(context, "OK")
                except GeneratorExit:
                    code = "CANCELLED"
                    raise
                except BaseException:
                    code = _code(context, "UNKNOWN")
                    raise
                finally:
                    end(start, code)
            return wrapped

        def non_blocking(behavior):
            """Health's Watch answers through a callback and holds no thread while it waits:
            wrapped as a generator it would hold one per watcher."""
            def wrapped(request, context, send_response_callback):
                start = begin()
                if not context.add_callback(lambda: end(start, _code(context, "CANCELLED"))):
                    end(start, _code(context, "CANCELLED"))  # already over
                behavior(request, context, send_response_callback)
            wrapped.experimental_non_blocking = True
            return wrapped

        if handler.unary_stream and getattr(handler.unary_stream, "experimental_non_blocking", False):
            return grpc.unary_stream_rpc_method_handler(
                non_blocking(handler.unary_stream), handler.request_deserializer, handler.response_serializer)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                unary(handler.unary_unary), handler.request_deserializer, handler.response_serializer)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                unary(handler.stream_unary), handler.request_deserializer, handler.response_serializer)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                streaming(handler.unary_stream), handler.request_deserializer, handler.response_serializer)
        return grpc.stream_stream_rpc_method_handler(
            streaming(handler.stream_stream), handler.request_deserializer, handler.response_serializer)
