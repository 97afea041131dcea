"""Decode a video and its audio ONCE with PyAV: frames are streamed, audio is gathered.

Every problem with an input becomes a VideoError whose reason is one line a user can act on.
"""
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import av
import numpy as np
from scipy.signal import resample_poly

from ..common.errors import InputTooLarge, VideoError
from .limits import Limits

VAD_RATE = 16000
DECODER = f"pyav {av.__version__} (ffmpeg)"


@dataclass
class VideoInfo:
    path: str
    width: int
    height: int
    fps: float
    duration_s: float
    has_audio: bool
    codec: str


@dataclass
class Audio:
    samples: np.ndarray  # mono float32 at the native rate
    rate: int

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.rate if self.rate else 0.0

    def at_vad_rate(self) -> np.ndarray:
        """16 kHz mono float32, as Silero VAD expects."""
        if self.rate == VAD_RATE:
            return self.samples
        g = np.gcd(self.rate, VAD_RATE)
        return resample_poly(self.samples, VAD_RATE // g, self.rate // g).astype(np.float32)


def _open(path: str) -> av.container.InputContainer:
    p = Path(path)
    if not p.exists():
        raise VideoError(path, "file not found: check the path")
    if p.is_dir():
        raise VideoError(path, "is a directory, not a video file")
    if p.stat().st_size == 0:
        raise VideoError(path, "empty file (0 bytes)")
    try:
        return av.open(str(p))
    except (av.error.InvalidDataError, av.error.FFmpegError, UnicodeDecodeError) as err:
        raise VideoError(path, f"not a readable video (the container cannot be parsed: {err})") from err


class MediaReader:
    """One video file: validated on construction, decoded once by iterating frames().

    After frames() is exhausted, `audio` holds the whole audio track (None without one) and
    `frame_count` the number of decoded frames.
    """

    def __init__(self, path, limits: Limits = Limits()):
        self.path = str(path)
        self.limits = limits
        size = os.path.getsize(self.path) if os.path.isfile(self.path) else 0
        if size > limits.max_bytes:
            raise InputTooLarge(self.path, f"file is {size / 1e6:.0f} MB, over the {limits.max_bytes / 1e6:.0f} MB "
                                        "limit (raise THEVAL_MAX_BYTES)")
        self._container = _open(self.path)
        if not self._container.streams.video:
            self._container.close()
            raise VideoError(self.path, "no video stream in the file")
        v = self._container.streams.video[0]
        a = self._container.streams.audio[0] if self._container.streams.audio else None
        fps = float(v.average_rate or v.guessed_rate or 0)
        if fps <= 0:
            self._container.close()
            raise VideoError(self.path, "video stream has no frame rate")
        duration = self._duration(v)
        self.info = VideoInfo(self.path, v.codec_context.width, v.codec_context.height, fps,
                              duration, a is not None, v.codec_context.name)
        self._check_limits()
        self.audio: Audio | None = None
        self.frame_count = 0

    def _duration(self, v) -> float:
        if v.duration is not None and v.time_base is not None:
            return float(v.duration * v.time_base)
        if self._container.duration is not None:
            return self._container.duration / av.time_base
        return 0.0

    def _check_limits(self):
        i, lim = self.info, self.limits
        if max(i.width, i.height) > lim.max_side_px:
            self.close()
            raise InputTooLarge(self.path, f"resolution {i.width}x{i.height} is over the {lim.max_side_px} px limit "
                                        "(raise THEVAL_MAX_SIDE_PX or downscale the video)")
        if i.duration_s > lim.max_duration_s:
            self.close()
            raise InputTooLarge(self.path, f"duration {i.duration_s:.0f} s is over the {lim.max_duration_s:.0f} s "
                                        "limit (raise THEVAL_MAX_DURATION_S or split the video)")

    def frames(self) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (index, RGB uint8 HxWx3) for every frame, gathering the audio on the way."""
        c = self._container
        v = c.streams.video[0]
        streams = [v] + ([c.streams.audio[0]] if self.info.has_audio else [])
        chunks, rate = [], 0
        try:
            for packet in c.demux(*streams):
                for frame in packet.decode():
                    if packet.stream.type == "video":
                        yield self.frame_count, frame.to_ndarray(format="rgb24")
                        self.frame_count += 1
                    else:
                        rate = frame.sample_rate
                        chunks.append(_channels(frame))
        except av.error.FFmpegError as err:
            raise VideoError(self.path, f"corrupt stream after {self.frame_count} frames ({err})") from err
        finally:
            self.close()
        if self.frame_count == 0:
            raise VideoError(self.path, "no decodable video frames")
        if self.info.has_audio:
            self.audio = _mono(chunks, rate)

    def read_audio(self) -> Audio | None:
        """Decode only the audio track (for the exact-reference mode, which needs it first)."""
        if not self.info.has_audio:
            self.close()
            return None
        chunks, rate = [], 0
        try:
            for frame in self._container.decode(audio=0):
                rate = frame.sample_rate
                chunks.append(_channels(frame))
        except av.error.FFmpegError as err:
            raise VideoError(self.path, f"corrupt audio stream ({err})") from err
        finally:
            self.close()
        return _mono(chunks, rate)

    def close(self):
        self._container.close()


def _channels(frame) -> np.ndarray:
    """An audio frame as float32 (channels, samples), whatever its sample format."""
    a = frame.to_ndarray()
    channels = len(frame.layout.channels)
    if not frame.format.is_planar:  # interleaved: (1, n*channels)
        a = a.reshape(-1, channels).T
    if a.dtype.kind == "i":  # integer PCM -> [-1, 1)
        a = a.astype(np.float32) / float(np.iinfo(a.dtype).max + 1)
    return a.astype(np.float32).reshape(channels, -1)


def _mono(chunks, rate) -> Audio:
    """Channels averaged to mono, as librosa's mono=True does."""
    if not chunks:
        return Audio(np.zeros(0, np.float32), rate)
    return Audio(np.concatenate(chunks, axis=1).mean(axis=0).astype(np.float32), rate)


def read_all_frames(path, limits: Limits = Limits()) -> tuple[list[np.ndarray], MediaReader]:
    """Convenience for small clips and tests: every frame in memory."""
    reader = MediaReader(path, limits)
    frames = [f for _, f in reader.frames()]
    return frames, reader
