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
DEPENDENCY_UP = prom.Gauge("theval_dependency_up", "1 when a service the evaluator needs is SERVING",
                           ["dependency"])

# The orchestrator: a job's driver process (`theval bulk run`)
JOBS_RUNNING = prom.Gauge("theval_jobs_running", "jobs this process is driving now")
JOBS_FINISHED = prom.Counter("theval_jobs_finished", "jobs this process stopped driving, by final state",
                             ["state"])
JOB_VIDEOS = prom.Counter("theval_job_videos", "videos a job committed, by outcome (ok, failed: a bad video)",
                          ["outcome"])
JOB_RETRIES = prom.Counter("theval_job_retries", "videos sent back to the queue after a transient failure")
JOB_IN_FLIGHT = prom.Gauge("theval_job_in_flight", "videos queued on or being scored by the workers (the "
                           "orchestrator's queue depth)")
STAGE_SECONDS = prom.Histogram("theval_compute_seconds", "compute time per video, by stage (landmarks, quality, "
                               "audio, head_pose) and per metric (metric:<key>)", ["stage"],
                               buckets=(0.0001, 0.001) + LATENCY_BUCKETS)


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


class _JobsCollector:
    """Read at each scrape from the job store: jobs by state, and the unfinished jobs' videos,
    per job or summed (a shared evaluator's /metrics must not list its callers' job ids)."""

    def __init__(self, store, per_job: bool):
        self.store, self.per_job = store, per_job

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        from ..orchestrator.job_store import FINISHED
        by_state = GaugeMetricFamily("theval_jobs", "jobs in the job store, by state", labels=["state"])
        videos = GaugeMetricFamily("theval_job_progress_videos", "videos of the unfinished jobs, by outcome "
                                   "(done, failed, remaining)", labels=(["job"] if self.per_job else []) + ["outcome"])
        counts: dict = {}
        totals: dict = {"done": 0, "failed": 0, "remaining": 0}
        for job in self.store.jobs():
            counts[job.state] = counts.get(job.state, 0) + 1
            if job.state not in FINISHED:
                for outcome, n in (("done", job.done), ("failed", job.failed), ("remaining", job.remaining)):
                    totals[outcome] += n
                    if self.per_job:
                        videos.add_metric([job.id, outcome], n)
        if not self.per_job:
            for outcome, n in totals.items():
                videos.add_metric([outcome], n)
        for state, n in sorted(counts.items()):
            by_state.add_metric([state], n)
        yield by_state
        yield videos


def register_jobs(store, per_job: bool = True):
    """Expose the job store's jobs on this process's /metrics (per_job: one series per job)."""
    prom.REGISTRY.register(_JobsCollector(store, per_job))
