"""Small JPEG thumbnails of chosen frames of a video, as data URIs for the self-contained report."""
import base64
import io

from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.limits import Limits

WIDTH = 160  # px: enough to see a blurred mouth, small enough for thousands in one file
QUALITY = 70


def frame_thumbnails(path: str, frames, width: int = WIDTH, limits: Limits = Limits()) -> dict[int, str]:
    """{frame index: data URI} of the wanted frames; decodes up to the last wanted frame only, under
    the decoder's limits. Raises what MediaReader raises for an unreadable file."""
    from PIL import Image

    wanted = sorted({int(f) for f in frames})
    out: dict[int, str] = {}
    if not wanted:
        return out
    reader = MediaReader(path, limits)
    try:
        for index, rgb in reader.frames():
            if index in wanted:
                image = Image.fromarray(rgb)
                image.thumbnail((width, width * 4))  # keeps the aspect ratio; never enlarges
                buffer = io.BytesIO()
                image.save(buffer, "JPEG", quality=QUALITY)
                out[index] = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()
            if index >= wanted[-1]:
                break
    finally:
        reader.close()
    return out
