"""What a call may take of its server's memory, reserved before the work starts.

The evaluator reserves, per video and before any service is called, what its header says scoring
it takes (its landmark series: received, as arrays, and in the quality and head-pose requests).
Each leaf reserves, per call and before it decodes a frame, what that call will take of its own
memory (measured per service: docs/benchmarks.md has the table). A call that does not fit waits
until others finish (within its deadline); one larger than the whole budget is refused. Concurrent
callers cannot take a server past its pod's memory limit, whatever they send.

Budgets come from the memory the process may use (its cgroup's limit, else the machine's): half of
it for the evaluator, LEAF_SHARE of it less what the loaded models hold for a leaf.
"""
import ctypes
import ctypes.util
import math
import os
import threading
import time
from pathlib import Path

from theval_mesh.backends.liveness import check
from theval_mesh.backends.media.decode import VideoInfo
from theval_mesh.core.frame_pass import QUEUE_FRAMES, mesh_passes
from theval_mesh.pure.errors import InputTooLarge, ServiceError
from theval_mesh.pure.metrics.quality import FRAME_BATCH, FRAME_BATCH_PIXELS
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import telemetry

MIB = 1 << 20
ROW_BYTES = 478 * 3 * 4  # one frame of refined FaceMesh points, float32 x, y, z
POLL_S = 0.25  # how soon a waiting call sees that its caller is gone
OPTION = "THEVAL_MEMORY_BUDGET_MB"

# The evaluator, per video.
FIXED_BYTES = 16 * MIB  # a video's messages, answers and bookkeeping beyond its landmark series
COPIES = 4  # the series as received, as arrays, and in the quality and head-pose requests

# The leaves, per call: measured peaks of `theval serve` processes (bench/leaf_memory.py), with
# margin. A leaf's budget is LEAF_SHARE of its memory less what it holds once loaded: the rest is
# the allocator's slack and what the estimates below miss.
LEAF_SHARE = 0.85
CALL_BYTES = 24 * MIB  # a call's request, decoder and bookkeeping
GRAPH_BYTES = 40 * MIB  # one MediaPipe FaceMesh graph (its interpreters and buffers)
LEAF_COPIES = 4  # landmarks: the series, its bytes, the response and gRPC's copy of it
REQUEST_COPIES = 4  # quality: the series as received, parsed, as arrays and in use
FIT_COPIES = 6  # head pose: the same, and the rigid fit's float64 points
PICTURE_COPIES = 3  # a decoded frame as RGB, and what one graph makes of it (BGR, its own image)
MODEL_BATCH_BYTES = 256 * MIB  # the quality models' and FaceXFormer's activations on one batch
# A second of a 48 kHz stereo track, decoded and what is computed from it (the reference profile's
# two 16-bit extractions among them): measured 2.26 MB (reference) and 1.48 MB (paper).
AUDIO_BYTES_PER_S = 2_500_000


def used_frames(info: VideoInfo, settings: RunSettings) -> int:
    """Frames the metrics use, from the header (a header without a frame count is taken at the
    duration limit)."""
    frames = info.header_frames or math.ceil(settings.limits.max_duration_s * info.fps)
    return math.ceil(frames / settings.frame_stride)


def picture_bytes(info: VideoInfo) -> int:
    return info.width * info.height * 3


def video_bytes(info: VideoInfo, settings: RunSettings) -> int:
    """What scoring this video takes of the evaluator's memory."""
    passes = len(mesh_passes(settings)) + (0 if settings.single_pass else 1)  # + the silent-lip pass
    return FIXED_BYTES + used_frames(info, settings) * passes * ROW_BYTES * COPIES


def track_bytes(info: VideoInfo, settings: RunSettings, silent_frames: int | None) -> int:
    """The landmarks service's Track: a FaceMesh graph per pass, the frames waiting for them, and
    the series (kept, then sent). silent_frames: rows of the silent-lip pass (None: no such pass)."""
    graphs = len(mesh_passes(settings)) + (silent_frames is not None)
    rows = used_frames(info, settings) * len(mesh_passes(settings)) + (silent_frames or 0)
    waiting = (QUEUE_FRAMES + 2) + graphs * PICTURE_COPIES
    return CALL_BYTES + graphs * GRAPH_BYTES + waiting * picture_bytes(info) + rows * ROW_BYTES * LEAF_COPIES


def batch_pictures(info: VideoInfo) -> int:
    """Frames a quality batch holds (backends.quality: FRAME_BATCH, fewer when they are large)."""
    return max(1, min(FRAME_BATCH, math.ceil(FRAME_BATCH_PIXELS / max(1, info.width * info.height))))


def score_bytes(info: VideoInfo, settings: RunSettings, series: int) -> int:
    """The quality service's Score: `series` landmark series as sent, and a batch of frames with
    the models' activations on it (as estimate_video_bytes)."""
    return estimate_video_bytes(info) + used_frames(info, settings) * series * ROW_BYTES * REQUEST_COPIES


def estimate_bytes(rows: int) -> int:
    """The head-pose service's Estimate (the rigid fit of `rows` frames of landmarks)."""
    return CALL_BYTES + rows * ROW_BYTES * FIT_COPIES


def estimate_video_bytes(info: VideoInfo) -> int:
    """The head-pose service's EstimateVideo: a batch of decoded frames (and those queued behind
    it) with the network's activations on it."""
    return CALL_BYTES + MODEL_BATCH_BYTES + (batch_pictures(info) + QUEUE_FRAMES) * picture_bytes(info)


def analyse_bytes(info: VideoInfo, settings: RunSettings) -> int:
    """The audio service's Analyse: the demuxer's pictures, the decoded track and what is computed
    from it (a header without a duration is taken at the duration limit)."""
    seconds = info.duration_s if info.duration_s > 0 else settings.limits.max_duration_s
    track = math.ceil(seconds * AUDIO_BYTES_PER_S) if info.has_audio else 0
    return CALL_BYTES + 2 * picture_bytes(info) + track


def memory_limit() -> int:
    """The bytes this process may use: its cgroup's limit (v2, then v1), else the machine's memory."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max", or v1's huge number: no limit
            return int(text)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def resident_bytes() -> int:
    """This process's resident memory now."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def default_budget(limit: int | None = None) -> int:
    """The evaluator's budget: half of `limit` (default: memory_limit())."""
    return (limit or memory_limit()) // 2


def leaf_budget(limit: int | None = None) -> int:
    """A leaf's budget: LEAF_SHARE of `limit` (default: memory_limit()) less what it holds now."""
    return max(0, int(LEAF_SHARE * (limit or memory_limit())) - resident_bytes())


_LIBC = ctypes.CDLL(ctypes.util.find_library("c")) if os.name == "posix" else None


def release_freed():
    """Give the memory that calls freed back to the system. glibc keeps freed blocks in per-thread
    arenas: without this a landmarks service kept ~1.4 GB after 8 calls had ended, and more each
    round (MediaPipe's graphs of the calls gone)."""
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


class MemoryBudget:
    def __init__(self, total_bytes: int, owner: str = "the evaluator"):
        self.total, self.used, self.owner = total_bytes, 0, owner
        self._cond = threading.Condition()
        telemetry.MEMORY_BUDGET.set(total_bytes)

    def resize(self, total_bytes: int):
        with self._cond:
            self.total = total_bytes
            telemetry.MEMORY_BUDGET.set(total_bytes)
            self._cond.notify_all()

    def reserve(self, nbytes: int, path: str, deadline: float, cancelled=None) -> "Reservation":
        """Take `nbytes` for the work on the video at `path`, waiting while others hold the budget;
        InputTooLarge when it exceeds the whole budget, ServiceError DEADLINE_EXCEEDED when the
        deadline passes first, Cancelled when the caller goes."""
        if nbytes > self.total:
            raise InputTooLarge(path, f"it takes about {nbytes / MIB:.0f} MiB of {self.owner}'s memory, more than its "
                                      f"whole budget of {self.total / MIB:.0f} MiB (raise {OPTION} and the memory of "
                                      f"{self.owner}, or split the video)")
        with self._cond:
            while self.used + nbytes > self.total:
                check(cancelled)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServiceError("DEADLINE_EXCEEDED", f"the deadline passed while the video waited for "
                                                            f"{self.owner}'s memory ({OPTION})")
                self._cond.wait(min(left, POLL_S))
            self.used += nbytes
            telemetry.MEMORY_RESERVED.set(self.used)
        return Reservation(self, nbytes)

    def _release(self, nbytes: int):
        with self._cond:
            self.used -= nbytes
            telemetry.MEMORY_RESERVED.set(self.used)
            self._cond.notify_all()


class Reservation:
    def __init__(self, budget: MemoryBudget, nbytes: int):
        self.budget, self.nbytes = budget, nbytes

    def release(self):
        if self.nbytes:
            self.budget._release(self.nbytes)
            self.nbytes = 0
