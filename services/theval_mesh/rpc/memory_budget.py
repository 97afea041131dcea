"""The evaluator's memory for the videos it is scoring. Each video reserves, before any service is
called, what its header says it will take (its landmark series: received, as arrays, and in the
quality and head-pose requests); a video that does not fit waits until others finish (within its
deadline), one larger than the whole budget is refused. Concurrent callers cannot take the
evaluator past its pod's memory limit, whatever they send: the budget defaults to half the memory
the process may use (its cgroup's limit, else the machine's)."""
import math
import os
import threading
import time
from pathlib import Path

from theval_mesh.backends.liveness import check
from theval_mesh.backends.media.decode import VideoInfo
from theval_mesh.core.frame_pass import mesh_passes
from theval_mesh.pure.errors import InputTooLarge, ServiceError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import telemetry
from theval_mesh.rpc.servicers.common import ROW_BYTES  # one frame of one FaceMesh pass

MIB = 1 << 20
FIXED_BYTES = 16 * MIB  # a video's messages, answers and bookkeeping beyond its landmark series
COPIES = 4  # the series as received, as arrays, and in the quality and head-pose requests
POLL_S = 0.25  # how soon a waiting video sees that its caller is gone


def video_bytes(info: VideoInfo, settings: RunSettings) -> int:
    """What scoring this video takes of the evaluator's memory, from its header (a header without
    a frame count is taken at the duration limit)."""
    frames = info.header_frames or math.ceil(settings.limits.max_duration_s * info.fps)
    passes = len(mesh_passes(settings)) + (0 if settings.single_pass else 1)  # + the silent-lip pass
    return FIXED_BYTES + math.ceil(frames / settings.frame_stride) * passes * ROW_BYTES * COPIES


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


def default_budget() -> int:
    return memory_limit() // 2


class MemoryBudget:
    def __init__(self, total_bytes: int):
        self.total, self.used = total_bytes, 0
        self._cond = threading.Condition()
        telemetry.MEMORY_BUDGET.set(total_bytes)

    def reserve(self, nbytes: int, path: str, deadline: float, cancelled=None) -> "Reservation":
        """Take `nbytes` for the video at `path`, waiting while others hold the budget; InputTooLarge
        when it exceeds the whole budget, ServiceError DEADLINE_EXCEEDED when the deadline passes
        first, Cancelled when the caller goes."""
        if nbytes > self.total:
            raise InputTooLarge(path, f"scoring it takes about {nbytes / MIB:.0f} MiB of the evaluator's memory, "
                                      f"more than its whole budget of {self.total / MIB:.0f} MiB (raise "
                                      "THEVAL_MEMORY_BUDGET_MB and the evaluator's memory, or split the video)")
        with self._cond:
            while self.used + nbytes > self.total:
                check(cancelled)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServiceError("DEADLINE_EXCEEDED", "the deadline passed while the video waited for the "
                                                            "evaluator's memory (THEVAL_MEMORY_BUDGET_MB)")
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
