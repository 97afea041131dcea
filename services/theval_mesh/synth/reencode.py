"""A video re-encoded in a way that should not matter to a metric: the other video codec (H.264 <->
H.265), the other audio codec (AAC <-> MP2), a quality step (CRF 18 or 28, x264's default 23 +- 5),
the other usual frame rate (25 <-> 30 fps) or half/double the resolution (512 <-> 256). What
`theval robustness` scores against the originals to measure each metric's noise floor.

Only the named property changes: the audio is copied when the picture is re-encoded and the picture
copied when the audio is; a frame-rate change shows, at each output time, the frame on screen then.
"""
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.errors import VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.scoring import robustness

CRF_DEFAULT = 23  # libx264's


@dataclass(frozen=True)
class Variant:
    name: str
    what: str  # the change, as a reader understands it, for the input at hand


KINDS = robustness.KINDS


def _even(n: float) -> int:
    return max(2, int(round(n / 2)) * 2)


def describe(kind: str, path) -> Variant:
    """What `kind` changes for this input (the change is to the other of the usual pair); the kind
    alone for a file whose headers cannot be read (reencode says why)."""
    try:
        with av.open(str(path)) as c:
            v = c.streams.video[0]
            a = c.streams.audio[0] if c.streams.audio else None
            codec, fps, height = v.codec_context.name, float(v.average_rate or 25), v.height
            audio = a.codec_context.name if a is not None else None
    except (av.error.FFmpegError, IndexError, AttributeError, TypeError):
        return Variant(kind, kind)
    if kind == "video-codec":
        return Variant(kind, "H.265 -> H.264" if codec == "hevc" else f"{codec} -> H.265")
    if kind == "audio-codec":
        return Variant(kind, f"{audio} -> {'AAC' if audio == 'mp2' else 'MP2'}" if audio else "no audio track")
    if kind in ("crf-5", "crf+5"):
        crf = CRF_DEFAULT + (5 if kind == "crf+5" else -5)
        return Variant(kind, f"{codec} -> H.264 CRF {crf}")
    if kind == "fps":
        return Variant(kind, f"{fps:g} -> {30 if round(fps) == 25 else 25} fps")
    if kind == "resolution":
        return Variant(kind, f"{height} -> {height // 2 if height >= 512 else height * 2} px high")
    raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")


def reencode(src, dst, kind: str, limits: Limits = Limits()) -> Path:
    """Write `src` changed by `kind` (KINDS) to `dst` (MP4); VideoError when it cannot be read or
    is over `limits` (the project's reader decodes it: limits hold on the headers and while decoding)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    src, dst = Path(src), Path(dst)
    reader = MediaReader(src, limits)
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
            if kind == "audio-codec":
                reader.close()
                _recode_audio(inp, out, limits)
            else:
                _recode_video(reader, inp, out, kind)
    # PyAV answers a damaged stream with FFmpegError, or ValueError where a frame does not fit the
    # encoder it was set up for (a track whose format changes midway): the file, not this code.
    except (av.error.FFmpegError, ValueError, IndexError) as err:
        dst.unlink(missing_ok=True)
        raise VideoError(str(src), f"cannot be re-encoded ({' '.join(str(err).split())[:300]})") from err
    except VideoError:
        dst.unlink(missing_ok=True)
        raise
    finally:
        reader.close()
    return dst


def _recode_video(reader: MediaReader, inp, out, kind: str):
    """The picture decoded by the reader (its limits, its rotation) and encoded again; then the
    audio packets copied as they are."""
    info = reader.info
    fps_in = Fraction(info.fps or 25).limit_denominator(1001)
    fps = fps_in
    if kind == "fps":
        fps = Fraction(30) if round(float(fps_in)) == 25 else Fraction(25)
    codec = "libx265" if kind == "video-codec" and info.codec != "hevc" else "libx264"
    crf = {"crf-5": CRF_DEFAULT - 5, "crf+5": CRF_DEFAULT + 5}.get(kind)
    scale = 1.0
    if kind == "resolution":
        scale = 0.5 if info.height >= 512 else 2.0
    vout = out.add_stream(codec, rate=fps)
    vout.width, vout.height, vout.pix_fmt = _even(info.width * scale), _even(info.height * scale), "yuv420p"
    vout.options = {"crf": str(crf)} if crf is not None else {}
    if codec == "libx265":
        vout.options = {**vout.options, "x265-params": "log-level=error"}
    ain = inp.streams.audio[0] if info.has_audio else None
    aout = out.add_stream_from_template(ain) if ain is not None else None
    for index, rgb in reader.frames():
        # the output frames k with index/fps_in <= k/fps < (index+1)/fps_in: those showing this frame
        first, end = (math.ceil(i * fps / fps_in) for i in (index, index + 1))
        for _ in range(end - first):
            _encode(out, vout, rgb)
    for p in vout.encode(None):
        out.mux(p)
    if ain is not None:
        for packet in inp.demux(ain):
            if packet.dts is not None:
                packet.stream = aout
                out.mux(packet)


def _encode(out, vout, rgb: np.ndarray):
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
    if (frame.width, frame.height) != (vout.width, vout.height):
        frame = frame.reformat(width=vout.width, height=vout.height, interpolation="AREA" if
                               frame.width > vout.width else "BICUBIC")
    for p in vout.encode(frame):
        out.mux(p)


def _recode_audio(inp, out, limits: Limits):
    """The picture's packets copied, the audio decoded and encoded with the other codec (its
    decoded length held to the duration limit)."""
    vin = inp.streams.video[0]
    ain = inp.streams.audio[0] if inp.streams.audio else None
    if ain is None:
        raise VideoError(inp.name, "no audio track to re-encode")
    vout = out.add_stream_from_template(vin)
    codec = "aac" if ain.codec_context.name == "mp2" else "mp2"
    aout = out.add_stream(codec, rate=ain.rate)
    aout.layout = ain.layout.name
    samples = 0
    for packet in inp.demux(vin, ain):
        if packet.stream.type == "video":
            if packet.dts is not None:
                packet.stream = vout
                out.mux(packet)
            continue
        for frame in packet.decode():
            samples += frame.samples
            if samples > limits.max_duration_s * ain.rate:
                raise VideoError(inp.name, f"audio longer than the {limits.max_duration_s:g} s limit")
            frame.pts = None
            for p in aout.encode(frame):
                out.mux(p)
    for p in aout.encode(None):
        out.mux(p)
