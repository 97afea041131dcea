"""Work stops when its caller goes away.

Long loops (a video's frames, the audio's VAD windows, the evaluator's calls to the services) take
`cancelled`: a callable that returns None while the work is still wanted and, once it is not, the
gRPC status code's name to end with (CANCELLED or DEADLINE_EXCEEDED). They call check(cancelled)
per frame or small batch. The embedded engine passes None: it is never cancelled.
"""
import threading

from theval_mesh.pure.errors import Cancelled

# The client's deadline timer started before ours (our deadline is its timeout counted from when the
# call arrived), so its cancel for a passed deadline reaches us up to a network hop and a busy
# scheduler early: a call gone this close to its deadline went because the deadline passed.
DEADLINE_SLACK_S = 1.0


def of_call(context):
    """cancelled() of a gRPC call being served: grpc ends a call whose client cancelled, went away
    or passed its deadline, and is_active() then turns false."""
    def cancelled():
        if context.is_active():
            return None
        left = context.time_remaining()
        return "DEADLINE_EXCEEDED" if left is not None and left <= DEADLINE_SLACK_S else "CANCELLED"
    return cancelled


def or_event(cancelled, event: threading.Event):
    """cancelled() that also fires (CANCELLED) once `event` is set: e.g. its stream ended."""
    return lambda: "CANCELLED" if event.is_set() else cancelled()


def check(cancelled):
    """Raise Cancelled once the caller is gone (never when `cancelled` is None)."""
    code = cancelled() if cancelled is not None else None
    if code:
        raise Cancelled(code)
