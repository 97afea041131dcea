"""Where a video sent to a server comes from: a URI under the allowed roots, or its bytes.

URIs are plain paths or file:// URIs; any other scheme is refused, and so is anything that
resolves (after `..` and symbolic links) outside the configured roots. Bytes are size-checked,
then written to a private temporary file for the decoder.
"""
import os
import re
import tempfile
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit

from ..common.errors import AccessDenied, InputTooLarge, VideoError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
BYTES_LABEL = "<video bytes>"


def resolve_uri(uri: str, roots) -> str:
    """The real local path of `uri`, checked to lie under one of `roots` (real paths)."""
    if not uri or "\x00" in uri:
        raise VideoError(uri or "<empty uri>", "empty or malformed URI")
    path = uri
    match = _SCHEME.match(uri)
    if match:
        scheme = match.group(1).lower()
        if scheme != "file":
            raise VideoError(uri, f"URI scheme {scheme!r} is not supported: give a file path or a "
                                  "file:// URI on storage the server can read")
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise VideoError(uri, "file:// URIs must name a local path (file:///path/to/video.mp4)")
        path = unquote(parts.path)
    if not os.path.isabs(path):
        raise VideoError(uri, "the path must be absolute (the server has no working folder of yours)")
    real = os.path.realpath(path)
    if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        raise AccessDenied(f"{uri}: outside the folders this server may read (its --allow-root / "
                           "THEVAL_ALLOWED_ROOTS)")
    return real


@contextmanager
def local_video(uri: str | None, content: bytes | None, roots, max_bytes: int):
    """A local path for the video, as a context (a temporary file for bytes is removed after)."""
    if uri:
        yield resolve_uri(uri, roots)
        return
    if content is None or len(content) == 0:
        raise VideoError(BYTES_LABEL, "empty video (0 bytes): send the file's bytes or a URI")
    if len(content) > max_bytes:
        raise InputTooLarge(BYTES_LABEL, f"video is {len(content)} bytes, over the {max_bytes}-byte "
                                         "limit (raise THEVAL_MAX_VIDEO_BYTES, or send a URI on shared storage)")
    fd, path = tempfile.mkstemp(prefix="theval-", suffix=".video")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        yield path
    finally:
        os.unlink(path)
