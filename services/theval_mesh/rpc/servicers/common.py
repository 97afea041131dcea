"""What the servicers share: the video reference, settings and limits; the Triton connection."""
import logging
import math
import time
from contextlib import contextmanager

from theval_mesh.backends import liveness
from theval_mesh.backends.media.sources import BYTES_LABEL, local_video
from theval_mesh.pure.errors import ServiceError, UserError, VideoError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.config import MIB, Config
from theval_mesh.rpc.memory_budget import ROW_BYTES, MemoryBudget, leaf_budget, release_freed
from theval_mesh.rpc.server import Service

log = logging.getLogger("theval.triton")
TRITON_RETRY_S = 2.0


@contextmanager
def opened_video(video_ref, config: Config):
    """The local path of a theval.v1.VideoRef; errors name the video as the caller gave it."""
    source = video_ref.WhichOneof("source")
    uri = video_ref.uri if source == "uri" else None
    content = video_ref.content if source == "content" else None
    with local_video(uri, content, config.allowed_roots, config.max_video_bytes) as path:
        try:
            yield path
        except VideoError as err:
            if path != uri and path in err.reason:  # a temporary file's name means nothing to the caller
                err.reason = err.reason.replace(path, BYTES_LABEL)
            raise


def run_settings(message, config: Config, default: RunSettings | None = None) -> RunSettings:
    try:
        return wire.settings_from_proto(message, default or config.run, config.limits)
    except ValueError as err:
        raise UserError(f"settings: {err}") from None


# What a leaf request can legitimately hold, per frame of the longest allowed video. Measured on
# the kit's clip_00 (seed 3, 4 s, 25 fps, 100 frames, 256 px, a face in every frame):
#   HeadPoseRequest  573,613 B = 100 x 5,736 (478 points x 3 x float32) + 13 B of header;
#   QualityRequest   video + 1,135,479 B = "single" 5,737 B/frame + "mouth_quality" 5,617 B/frame;
#   TrackRequest     video + 134 B (100 silent frame numbers and the settings); AudioRequest video + 19 B.
MAX_FPS = 60  # frame-rate bound: talking-head videos are 25-60 fps
INDEX_BYTES = 10  # one frame number, a varint of at most 10 bytes


def request_limit(config: Config, video: bool, series: int = 0, frame_lists: int = 0) -> int:
    """The largest request a leaf accepts: the video's bytes (if it takes one), `series` landmark
    series and `frame_lists` lists of frame numbers of the longest allowed video, and 1 MiB for
    headers and settings; never more than max_message_bytes. gRPC refuses anything larger
    (RESOURCE_EXHAUSTED), where max_message_bytes alone (1 GiB) let two 900 MiB calls take a
    server to 4.1 GB."""
    frames = math.ceil(config.limits.max_duration_s * MAX_FPS)
    arrays = frames * (series * (ROW_BYTES + INDEX_BYTES) + frame_lists * INDEX_BYTES)
    return min((config.max_video_bytes if video else 0) + arrays + MIB, config.max_message_bytes)


class LeafMemory:
    """A leaf's memory budget (rpc.memory_budget): THEVAL_MEMORY_BUDGET_MB, else sized from the
    process's memory once its models are loaded (until then, from what it holds at start)."""

    def __init__(self, config: Config):
        self.config = config
        self.budget = MemoryBudget(self._total(), owner=f"the {config.service} service")

    def _total(self) -> int:
        return self.config.memory_budget_mb * MIB or leaf_budget(self.config.memory_limit_mb * MIB)

    def after(self, load):
        """load(), then the budget sized from what the loaded models hold."""
        def run():
            if load:
                load()
            self.budget.resize(self._total())
        return run

    def reserve(self, nbytes: int, path: str, context):
        """Reserve `nbytes` for this call (waiting within its deadline; refused when over the whole
        budget), released once the call has ended: its response sent, not merely returned."""
        left = context.time_remaining()
        deadline = time.monotonic() + (left if left is not None else math.inf)
        reservation = self.budget.reserve(nbytes, path, deadline, liveness.of_call(context))

        def ended():
            release_freed()  # what the call freed goes back to the system, not to glibc's arenas
            reservation.release()
        if not context.add_callback(ended):  # the call has ended already (its caller went): never called
            ended()
        return reservation


def servicer_service(servicer, add_to_server, service_name: str, load=None, readiness=None,
                     receive_limit: int | None = None) -> Service:
    """A Service that adds one servicer to a gRPC server (the generated add_*_to_server). A
    servicer with a `memory` (LeafMemory) gets it sized once its models are loaded."""
    def add(server):
        add_to_server(servicer, server)
        return [service_name]
    memory = getattr(servicer, "memory", None)
    return Service(add, load=memory.after(load) if memory else load, readiness=readiness,
                   receive_limit=receive_limit)


def triton_client(config: Config):
    """The TritonClient of a service started with --backend triton, else None."""
    if config.backend != "triton":
        return None
    from theval_mesh.rpc.triton.client import TritonClient
    return TritonClient(config.triton_url, config.client_security())


def until_triton_answers(load, url: str):
    """load() again while Triton is UNAVAILABLE (not started yet, or still loading its models):
    a service may start before the Triton it needs, as pods do. Other errors stop the load."""
    waited = 0.0
    while True:
        try:
            return load()
        except ServiceError as err:
            if err.code != "UNAVAILABLE":
                raise
            if waited % 30 == 0:
                log.warning("waiting for Triton at %s: %s", url, err)
            time.sleep(TRITON_RETRY_S)
            waited += TRITON_RETRY_S
