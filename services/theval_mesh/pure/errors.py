"""Errors shared by every part of the product."""
from theval_mesh.pure.exit_codes import EXIT_ERROR, EXIT_NOT_RANKED, EXIT_USAGE

MAX_DETAIL = 1000  # characters: a status detail, a reason or a logged error is a line to read
KEEP_DETAIL = 300  # ... of which a longer one keeps these, then its length


def shorten(text: str) -> str:
    """`text`, or its start and its length when longer than MAX_DETAIL: a 20 MB URI came back
    whole in a detail and grew the server log by 60 MiB."""
    if len(text) <= MAX_DETAIL:
        return text
    return f"{text[:KEEP_DETAIL]}... ({len(text)} characters)"


class UserError(Exception):
    """A problem the user can fix (bad flag, missing file, missing weights).

    The message names the file or setting at fault and says what to do; the CLI prints it
    as one line without a traceback, and exits with `exit_code`.
    """
    exit_code = EXIT_ERROR


class InputsRefused(UserError):
    """The inputs cannot give what was asked, known before any model loads (e.g. no GT video has
    an audio track, so two metrics cannot be normalised): nothing was scored."""
    exit_code = EXIT_USAGE


class UsageRefused(UserError):
    """Bad usage, refused before any work: a flag's value that is malformed (--model without
    NAME=, HOST:PORT without a port, a setting out of range) or that the machine cannot honour
    (--device cuda without a usable GPU). Exits 2, as argparse's own errors."""
    exit_code = EXIT_USAGE


class NotRanked(UserError):
    """The videos were scored and their per-video results written, but no leaderboard could be
    formed from them (e.g. the GT is zero or NaN on a metric). `written`: the files on disk;
    `results`: the per-video results (VideoResult), for the Python API."""
    exit_code = EXIT_NOT_RANKED

    def __init__(self, reason: str, folder, written: list[str], missing: list[str], results=None):
        super().__init__(f"no leaderboard: {reason}. The per-video results are in {folder}: {', '.join(written)}; "
                         f"not written: {', '.join(missing)}")
        self.reason, self.written, self.missing, self.results = reason, written, missing, results


class VideoError(UserError):
    """One input video cannot be scored (corrupt, no frames, too large, ...).

    It fails that video only, with `reason` recorded in the results; the batch goes on.
    """

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class WeightsMissing(UserError):
    """A model's weights are not in the weights store."""


class NotServed(UserError):
    """A service asked for what it was not started to serve, e.g. FaceXFormer of a head-pose
    service serving the rigid fit (FAILED_PRECONDITION over gRPC): the message names the fix."""


class InputTooLarge(VideoError):
    """A video over a size, duration or resolution limit (RESOURCE_EXHAUSTED over gRPC)."""


class Overloaded(UserError):
    """More than a limit of work at once (jobs, workers): retry later (RESOURCE_EXHAUSTED)."""


class NotResumable(UserError):
    """A job that cannot be resumed now: it runs, is done or was cancelled (FAILED_PRECONDITION)."""


class AccessDenied(UserError):
    """A path or URI outside the roots a server may read (PERMISSION_DENIED over gRPC)."""


class NotFound(UserError):
    """A named thing (e.g. a GT reference set) that does not exist (NOT_FOUND over gRPC)."""


class AlreadyExists(UserError):
    """A name that is taken (ALREADY_EXISTS over gRPC)."""


class ServiceError(Exception):
    """A call to another service of the mesh failed. `code` is the gRPC status code's name
    (e.g. "UNAVAILABLE"); the evaluator answers its own caller with the same code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class Cancelled(Exception):
    """The caller of the work went away (it cancelled, or its deadline passed): the work stopped
    early. `code` is the gRPC status code's name: CANCELLED or DEADLINE_EXCEEDED."""

    def __init__(self, code: str = "CANCELLED"):
        super().__init__("the caller's deadline passed: work stopped" if code == "DEADLINE_EXCEEDED"
                         else "the caller cancelled: work stopped")
        self.code = code
