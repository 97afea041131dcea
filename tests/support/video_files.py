"""Real video files for tests, written with PyAV and PIL (importable by name: conftest modules collide)."""
import io

import av
import numpy as np
from PIL import Image


def write_video(path, images, fps=25, audio=None, audio_rate=16000, video_codec="libx264", audio_codec="aac",
                audio_format="fltp"):
    """A real file: the given RGB images, and `audio` (float32, channels x samples) if given."""
    out = av.open(str(path), "w")
    h, w = images[0].shape[:2]
    vs = out.add_stream(video_codec, rate=fps)
    vs.width, vs.height = w, h
    vs.pix_fmt = "rgb24" if video_codec == "png" else "yuv420p"
    if audio is not None:
        aus = out.add_stream(audio_codec, rate=audio_rate)
        aus.layout = "mono" if len(audio) == 1 else "stereo"
    for img in images:
        for p in vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            out.mux(p)
    for p in vs.encode():
        out.mux(p)
    if audio is not None:
        for k in range(0, audio.shape[1], 1024):
            chunk = np.ascontiguousarray(audio[:, k:k + 1024])
            if audio_format == "flt":  # packed: one row of interleaved samples
                chunk = np.ascontiguousarray(chunk.T.reshape(1, -1))
            fr = av.AudioFrame.from_ndarray(chunk, format=audio_format, layout=aus.layout.name)
            fr.sample_rate, fr.pts = audio_rate, k
            for p in aus.encode(fr):
                out.mux(p)
        for p in aus.encode():
            out.mux(p)
    out.close()
    return path


def silent_gradient(path, seconds: int, size: int = 64, fps: int = 25):
    """A long silent clip of a moving gradient (no face, no audio), encoded as it is made: the
    probes' 600 s clip, 0.3 MB, with no list of its 15,000 frames in memory."""
    out = av.open(str(path), "w")
    stream = out.add_stream("libx264", rate=fps)
    stream.width = stream.height = size
    stream.pix_fmt = "yuv420p"
    row = (np.arange(size, dtype=np.uint16) * 4 % 256).astype(np.uint8)
    for i in range(seconds * fps):
        frame = np.broadcast_to((row + np.uint8(i % 200))[None, :, None], (size, size, 3)).copy()
        for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
            out.mux(packet)
    for packet in stream.encode():
        out.mux(packet)
    out.close()
    return path


def raw_h264(path, segments, fps=25):
    """A raw H.264 elementary stream (no container: no duration, no frame count) named as given.
    segments: [(width, height, frames)], each encoded on its own with its own SPS, one after the
    other, as a stream whose resolution changes midway."""
    data = io.BytesIO()
    for w, h, n in segments:
        out = av.open(data, "w", format="h264")
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt, vs.options = w, h, "yuv420p", {"preset": "ultrafast"}
        for i in range(n):
            img = np.full((h, w, 3), (i * 7) % 256, np.uint8)
            for p in vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(p)
        for p in vs.encode():
            out.mux(p)
        out.close()
    path.write_bytes(data.getvalue())
    return path




def gradient(n, w=64, h=48):
    """n frames of a moving gradient."""
    row = ((np.arange(w) * 4) % 256).astype(np.uint8)[None, :, None]
    return [np.broadcast_to(row + np.uint8(i * 8 % 256), (h, w, 3)).copy() for i in range(n)]


def tone(seconds, rate=16000, amplitude=0.5):
    """A 440 Hz tone, one channel."""
    t = np.arange(int(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None, :]


def image_bytes(fmt, frames=1, **kw):
    """An image file (PIL format name), animated when frames > 1."""
    images = [Image.fromarray(np.full((32, 40, 3), 40 * i, np.uint8)) for i in range(frames)]
    data = io.BytesIO()
    images[0].save(data, fmt, save_all=frames > 1, append_images=images[1:], **kw)
    return data.getvalue()


def without_decoder(path, stream: str):
    """The MP4 at `path` rewritten so that ffmpeg has no decoder for its `stream` ("video" or "audio"),
    as byte damage to a header does: the H.264 sample entry renamed, or the AAC track's object
    type set to 1 (MPEG-4 Systems). PyAV then opens the stream with no codec context."""
    data = bytearray(open(path, "rb").read())
    if stream == "video":
        data = data.replace(b"avc1", b"zzzz")
    else:
        at = data.find(b"esds")
        at = data.find(b"\x04", at + 8)  # the DecoderConfigDescriptor tag
        while data[at + 1] & 0x80:  # its length, in 7-bit groups
            at += 1
        assert data[at + 2] == 0x40, "not an AAC track"
        data[at + 2] = 0x01
    open(path, "wb").write(bytes(data))
    return path
