"""Silence native (C++) libraries that print to the stderr file descriptor directly."""
import contextlib
import os
import sys

# For a child process's environment: MediaPipe and TensorFlow Lite log every graph start at
# INFO/WARNING on stderr.
QUIET = {"GLOG_minloglevel": "2", "TF_CPP_MIN_LOG_LEVEL": "2"}


@contextlib.contextmanager
def quiet_native_stderr():
    """Point fd 2 at /dev/null for the duration (Python's own writes are flushed first).

    MediaPipe prints a handful of INFO/WARNING lines each time a graph starts; they are not
    about the user's input and drown the progress bars and failure lines.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)
