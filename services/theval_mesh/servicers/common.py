"""What the servicers share: the video reference, settings and limits; the Triton connection."""
import logging
import time
from contextlib import contextmanager

from ..common.config import Config
from ..common.errors import ServiceError, UserError, VideoError
from ..common.server import Service
from ..media.sources import BYTES_LABEL, local_video
from ..orchestrator.settings import RunSettings
from . import wire

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


def servicer_service(servicer, add_to_server, service_name: str, load=None, readiness=None) -> Service:
    """A Service that adds one servicer to a gRPC server (the generated add_*_to_server)."""
    def add(server):
        add_to_server(servicer, server)
        return [service_name]
    return Service(add, load=load, readiness=readiness)


def triton_client(config: Config):
    """The TritonClient of a service started with --backend triton, else None."""
    if config.backend != "triton":
        return None
    from ..triton.client import TritonClient
    return TritonClient(config.triton_url)


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
