"""Decode a video and its audio ONCE with PyAV: frames are streamed, audio is gathered.

Every problem with an input becomes a VideoError whose reason is one line a user can act on.
"""
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import av
import numpy as np

from ..common.errors import InputTooLarge, VideoError
from .audio import Audio, AudioGatherer
from .limits import Limits

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
    # Frame count as OpenCV's CAP_PROP_FRAME_COUNT gives it (the stream's frame count, else
    # duration x fps), which the reference's silent-lip script uses; lip-sync's decord counts the
    # frames themselves. They agree on a well-formed constant-frame-rate file.
    header_frames: int = 0
    guessed_fps: float = 0.0  # the stream's base frame rate (r_frame_rate): != fps suggests VFR


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

    def __init__(self, path, limits: Limits = Limits(), reference_audio: bool = False):
        """reference_audio: also extract the audio as the reference scripts do (media.audio)."""
        self.path = str(path)
        self.limits = limits
        self.reference_audio = reference_audio
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
        container_s = self._container.duration / av.time_base if self._container.duration else duration
        self.info = VideoInfo(self.path, v.codec_context.width, v.codec_context.height, fps,
                              duration, a is not None, v.codec_context.name,
                              header_frames=v.frames or int(container_s * fps + 0.5),
                              guessed_fps=float(v.guessed_rate or fps))
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
        audio = AudioGatherer(self.reference_audio)
        try:
            for packet in c.demux(*streams):
                for frame in packet.decode():
                    if packet.stream.type == "video":
                        yield self.frame_count, frame.to_ndarray(format="rgb24")
                        self.frame_count += 1
                    else:
                        audio.add(frame)
        except av.error.FFmpegError as err:
            raise VideoError(self.path, f"corrupt stream after {self.frame_count} frames ({err})") from err
        finally:
            self.close()
        if self.frame_count == 0:
            raise VideoError(self.path, "no decodable video frames")
        if self.info.has_audio:
            self.audio = audio.finish()

    def read_audio(self) -> Audio | None:
        """Decode only the audio track (the silent-lip pass needs the speech before the frames)."""
        if not self.info.has_audio:
            self.close()
            return None
        audio = AudioGatherer(self.reference_audio)
        try:
            for frame in self._container.decode(audio=0):
                audio.add(frame)
        except av.error.FFmpegError as err:
            raise VideoError(self.path, f"corrupt audio stream ({err})") from err
        finally:
            self.close()
        return audio.finish()

    def close(self):
        self._container.close()


def read_all_frames(path, limits: Limits = Limits()) -> tuple[list[np.ndarray], MediaReader]:
    """Convenience for small clips and tests: every frame in memory."""
    reader = MediaReader(path, limits)
    frames = [f for _, f in reader.frames()]
    return frames, reader
