"""The C allocator's thresholds for a process that runs the networks, set once when theval_mesh is
imported (so in every process of the product: the command, a service, a Ray worker, the API's).

glibc gives every allocation above its mmap threshold (which adapts, up to 32 MiB) a mapping of its
own and unmaps it when it is freed, and a thread other than the main one gets an arena of at most
64 MiB. A network's activations are tens to hundreds of MB, allocated and freed in every forward
pass, so every pass faulted all of their pages in again: on this project's 2-core CPU that was a
third of a ResNet-50 pass at 768 px (5 passes: 5.6 s -> 3.9 s, 730,000 page faults -> none, the
outputs bit for bit the same; bench/allocator.py). Here allocations up to 1 GiB come from the heap,
up to 1 GiB freed at its top is kept for the next pass, and every thread allocates from the main
arena.

The cost: a process keeps the memory it once used (its peak) instead of returning it between
videos. `THEVAL_MALLOC=system`, or any glibc malloc setting of one's own in the environment
(MALLOC_*, GLIBC_TUNABLES), leaves glibc's defaults; other C libraries are left alone.
"""
import ctypes
import os
import sys

ENV = "THEVAL_MALLOC"
KEEP_BYTES = 1 << 30
# mallopt's parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
SETTINGS = ((M_MMAP_THRESHOLD, KEEP_BYTES), (M_TRIM_THRESHOLD, KEEP_BYTES), (M_ARENA_MAX, 1))

_state: list[str] = []


def tune() -> str:
    """Set the thresholds, once per process. Returns what is in force, for the record: "kept
    (...)" or "system (why)"."""
    if not _state:
        _state.append(_set())
    return _state[0]


def _own_settings() -> str | None:
    mine = sorted(k for k in os.environ if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES")
    if os.environ.get(ENV, "").strip().lower() == "system":
        return f"{ENV}=system"
    return f"{', '.join(mine)} set" if mine else None


def _set() -> str:
    own = _own_settings()
    if own:
        return f"system ({own})"
    if not sys.platform.startswith("linux"):
        return "system (not glibc)"
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on (no ldconfig lookup)
    except (OSError, AttributeError):
        return "system (no mallopt)"
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not all(mallopt(option, value) == 1 for option, value in SETTINGS):
        return "system (mallopt refused)"  # musl's is a stub
    return f"kept (heap up to {KEEP_BYTES >> 20} MiB, freed memory kept up to {KEEP_BYTES >> 20} MiB, one arena)"
