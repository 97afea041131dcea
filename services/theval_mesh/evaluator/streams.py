"""EvaluateStream's flow: a request is read only when one of `concurrency` scoring slots is free,
and its slot frees once its answer is sent, so a stream holds at most `concurrency` videos (the
client waits, through gRPC's flow control, with the rest). Answers go back as each finishes.

A stream that sends no request for idle_s while none of its videos is being scored, or is open
for max_s, ends with DEADLINE_EXCEEDED; its videos in progress stop (backends.liveness).
"""
import queue
import threading
import time

import grpc

from theval_mesh.backends import liveness
from theval_mesh.rpc import telemetry
from theval_mesh.rpc.admission import stream_too_old

POLL_S = 0.25
_END = object()  # the client sent its last request (or went away)


def answered_as_they_finish(requests, context, score, concurrency: int, idle_s: float, max_s: float):
    """Yields score(request, cancelled) for every request, in the order they finish."""
    stopped = threading.Event()
    cancelled = liveness.or_event(liveness.of_call(context), stopped)
    slots = threading.Semaphore(concurrency)
    answers: queue.Queue = queue.Queue()
    lock = threading.Lock()
    state = {"read": 0, "busy": 0, "last": time.monotonic()}  # busy: read and not answered yet

    def one(request):
        telemetry.QUEUE.dec()
        answers.put(score(request, cancelled))

    def read():
        try:
            while not stopped.is_set():
                if not slots.acquire(timeout=POLL_S):
                    continue
                request = next(requests, None)  # only now: nothing is read ahead of a free slot
                if request is None:
                    break
                with lock:
                    state["read"] += 1
                    state["busy"] += 1
                    state["last"] = time.monotonic()
                telemetry.QUEUE.inc()
                threading.Thread(target=one, args=(request,), name="stream-video", daemon=True).start()
        except Exception:  # noqa: BLE001, S110 - the client went away: answer what was received
            pass
        answers.put(_END)

    threading.Thread(target=read, name="stream-reader", daemon=True).start()
    opened, sent, reading = time.monotonic(), 0, True
    try:
        while reading or sent < state["read"]:
            try:
                item = answers.get(timeout=POLL_S)
            except queue.Empty:
                item = None
            if item is _END:
                reading = False
            elif item is not None:
                yield item
                sent += 1
                with lock:
                    state["busy"] -= 1
                    state["last"] = time.monotonic()
                slots.release()
            if not context.is_active():
                return
            with lock:
                idle = reading and state["busy"] == 0 and time.monotonic() - state["last"] > idle_s
            if idle:
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                              f"no request for {idle_s:g} s and nothing being scored: idle stream closed "
                              "(THEVAL_STREAM_IDLE_S)")
            if time.monotonic() - opened > max_s:
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, stream_too_old(max_s))
    finally:
        stopped.set()
