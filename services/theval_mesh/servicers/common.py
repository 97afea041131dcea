"""What every servicer that reads videos shares: the video reference, settings and limits."""
from contextlib import contextmanager

from ..common.config import Config
from ..common.errors import UserError, VideoError
from ..common.server import Service
from ..media.sources import BYTES_LABEL, local_video
from ..orchestrator.settings import RunSettings
from . import wire


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


def servicer_service(servicer, add_to_server, service_name: str, load=None) -> Service:
    """A Service that adds one servicer to a gRPC server (the generated add_*_to_server)."""
    def add(server):
        add_to_server(servicer, server)
        return [service_name]
    return Service(add, load=load)
