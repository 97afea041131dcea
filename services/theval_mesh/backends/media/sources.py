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

from theval_mesh.pure.errors import AccessDenied, InputTooLarge, VideoError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
BYTES_LABEL = "<video bytes>"
# Linux's PATH_MAX and NAME_MAX, in bytes: longer cannot name a file, and the file system answers
# ENAMETOOLONG, which reached callers as an internal error (and a 20 MB URI was echoed whole).
MAX_URI_BYTES = 4096
MAX_NAME_BYTES = 255


def _check_size(uri: str):
    """A VideoError naming the URI by its length only (its path decodes to no more bytes)."""
    size = len(uri.encode())
    if size > MAX_URI_BYTES:
        raise VideoError(f"<URI of {size} bytes>", f"the URI is {size} bytes, over the {MAX_URI_BYTES}-byte "
                                                   "limit of a path (PATH_MAX)")


def _check_names(uri: str, path: str):
    longest = max((len(part.encode()) for part in path.split(os.sep)), default=0)
    if longest > MAX_NAME_BYTES:
        raise VideoError(uri, f"a file or folder name of the path is {longest} bytes, over the file system's "
                              f"{MAX_NAME_BYTES}-byte limit (NAME_MAX): no such file")


def resolve_uri(uri: str, roots) -> str:
    """The real local path of `uri`, checked to lie under one of `roots` (real paths)."""
    if not uri:
        raise VideoError("<empty uri>", "empty URI: give a path or a file:// URI")
    _check_size(uri)  # before anything else reads it
    if "\x00" in uri:
        raise VideoError(uri.replace("\x00", "\\0"), "malformed URI: a NUL byte in it")
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
        if "\x00" in path:
            raise VideoError(uri, "malformed URI: %00 (a NUL byte) in its path")
    _check_names(uri, path)
    if not os.path.isabs(path):
        raise VideoError(uri, "the path must be absolute (the server has no working folder of yours)")
    real = os.path.realpath(path)
    if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        # The reason first: a status detail keeps only the start of a long one (rpc.status).
        raise AccessDenied("outside the folders this server may read (its --allow-root / "
                           f"THEVAL_ALLOWED_ROOTS): {uri}")
    try:
        os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        pass  # the decoder says "file not found"
    except OSError as err:  # e.g. a folder on the way that the server may not enter
        raise VideoError(uri, f"cannot read the file: {err.strerror}") from None
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
