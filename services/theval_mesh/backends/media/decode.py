"""Decode a video and its audio ONCE with PyAV: frames are streamed, audio is gathered.

Every problem with an input becomes a VideoError whose reason is one line a user can act on.
"""
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import av
import numpy as np

from theval_mesh.backends.liveness import check
from theval_mesh.backends.media.audio import Audio, AudioGatherer
from theval_mesh.backends.media.files import not_a_file
from theval_mesh.pure.errors import InputTooLarge, VideoError
from theval_mesh.pure.limits import Limits

DECODER = f"pyav {av.__version__} (ffmpeg)"


@dataclass
class VideoInfo:
    path: str
    width: int   # of the frames as decoded, i.e. after `rotation`
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
    # Degrees a player turns the stored picture clockwise to show it (the display matrix, as the
    # old `rotate` tag and a phone filming in portrait give it: 0, 90, 180 or 270). frames()
    # yields the turned picture.
    rotation: int = 0


# Demuxers of still images (ffmpeg's img2 family is "<codec>_pipe"): never a talking-head video.
IMAGE_FORMATS = {"image2", "gif", "apng"}
IMAGE_CODECS = {"png", "apng", "mjpeg", "jpeg2000", "gif", "bmp", "webp", "tiff", "qoi", "jpegxl"}


def _decoder_bound(limits: Limits) -> dict:
    """ffmpeg's own bound on each picture a decoder allocates (AVCodecContext.max_pixels): a
    header or a new SPS that claims a huge picture fails inside the decoder, before the memory is
    taken. Twice max_side_px squared: decoders count their padding, and what passes max_side_px
    (checked on each decoded frame) must never be refused here."""
    return {"max_pixels": str(min(2 * limits.max_side_px ** 2, 2 ** 31 - 1))}


def _open(path: str, limits: Limits) -> av.container.InputContainer:
    """The container, probed: ffmpeg decodes a few frames while it probes, under the bound too
    (given as options, which ffmpeg applies to every stream a demuxer declares before probing)."""
    p = Path(path)
    why = not_a_file(p)  # before opening it: a FIFO would block
    if why:
        raise VideoError(path, why)
    if p.stat().st_size == 0:
        raise VideoError(path, "empty file (0 bytes)")
    try:
        return av.open(str(p), options=_decoder_bound(limits))
    except (av.error.InvalidDataError, av.error.FFmpegError, UnicodeDecodeError) as err:
        raise VideoError(path, f"not a readable video (the container cannot be parsed: {err})") from err


def _image_kind(container, v) -> str | None:
    """The image type when the 'video' is a still or animated image (e.g. a PNG named .mp4)."""
    formats = set(container.format.name.split(","))
    codec = v.codec_context.name
    if (formats & IMAGE_FORMATS or any(f.endswith("_pipe") for f in formats)
            or (codec in IMAGE_CODECS and v.frames == 1)
            or v.disposition & av.stream.Disposition.attached_pic):  # cover art of an audio file
        return {"mjpeg": "jpeg"}.get(codec, codec)
    return None


def _frame_rate(v) -> float:
    """The average frame rate, 0 when the stream's time base cannot time frames: ffmpeg turns an
    MP4 timescale of 0 into a time base of 1 s, which gives a bogus rate and duration."""
    if not v.time_base or v.time_base >= 1:
        return 0.0
    return float(v.average_rate or v.guessed_rate or 0)


def _rotation(path: str, limits: Limits) -> int:
    """The display rotation (see VideoInfo.rotation). PyAV shows the display matrix only on
    decoded frames, so the first frame is decoded from a second, throwaway opening: only once the
    header passed the limits, and with the decoder bounded as the real decode is."""
    try:
        with _open(path, limits) as c:
            c.streams.video[0].codec_context.options = _decoder_bound(limits)
            for frame in c.decode(video=0):
                return round(-frame.rotation / 90) % 4 * 90  # frame.rotation is counter-clockwise
    except (VideoError, av.error.FFmpegError, UnicodeDecodeError):
        pass  # the real decode reports the problem
    return 0


class MediaReader:
    """One video file: validated on construction, decoded once by iterating frames().

    After frames() is exhausted, `audio` holds the whole audio track (None without one; an Audio
    whose `problem` is set when the track is unusable) and `frame_count` the number of decoded
    frames. Limits are checked on the header, then again on what is decoded.
    """

    def __init__(self, path, limits: Limits = Limits(), reference_audio: bool = False, syncnet_audio: bool = False):
        """reference_audio: also extract the audio as the reference scripts do; syncnet_audio: also
        as syncnet_python does (both in backends.media.audio)."""
        self.path = str(path)
        self.limits = limits
        self.reference_audio = reference_audio
        self.syncnet_audio = syncnet_audio
        size = os.path.getsize(self.path) if os.path.isfile(self.path) else 0
        if size > limits.max_bytes:
            raise InputTooLarge(self.path, f"file is {size / 1e6:.0f} MB, over the {limits.max_bytes / 1e6:.0f} MB "
                                        "limit (raise THEVAL_MAX_BYTES)")
        self._container = _open(self.path, limits)
        try:
            self.info = self._read_info()
            self._container.streams.video[0].codec_context.options = _decoder_bound(limits)
            # A track ffmpeg cannot decode: the video is scored, its audio is unusable (with the reason).
            self._audio_problem = ("the audio stream's codec is unknown to ffmpeg" if self.info.has_audio
                                   and self._container.streams.audio[0].codec_context is None else None)
        except VideoError:
            self._container.close()
            raise
        self.audio: Audio | None = None
        self._audio_given = False  # use_audio(): frames() leaves the audio stream alone
        self.frame_count = 0
        self.pixels = 0  # decoded so far, for Limits.max_pixels

    def use_audio(self, audio: Audio | None):
        """The audio track, decoded already by another reader's read_audio(): frames() decodes
        the video stream only, and `audio` is this."""
        self.audio, self._audio_given = audio, True

    def _read_info(self) -> VideoInfo:
        c = self._container
        if not c.streams.video:
            raise VideoError(self.path, "no video stream in the file")
        v = c.streams.video[0]
        if v.codec_context is None:  # a codec id or tag ffmpeg has no decoder for (a damaged header)
            raise VideoError(self.path, "the video stream's codec is unknown to ffmpeg (a damaged or unsupported "
                                        "file): re-encode it, e.g. `ffmpeg -i IN -c:v libx264 OUT.mp4`")
        a = c.streams.audio[0] if c.streams.audio else None
        kind = _image_kind(c, v)
        if kind:
            raise VideoError(self.path, f"an image ({kind}), not a video")
        # Before the duration: that is computed from the same time base.
        fps = _frame_rate(v)
        if fps <= 0:
            raise VideoError(self.path, "video stream has no frame rate")
        duration = self._duration(v)
        container_s = c.duration / av.time_base if c.duration else duration
        w, h = v.codec_context.width, v.codec_context.height
        info = VideoInfo(self.path, w, h, fps, duration, a is not None, v.codec_context.name,
                         header_frames=v.frames or int(container_s * fps + 0.5), guessed_fps=float(v.guessed_rate or fps))
        # Every limit holds whichever way the picture is turned: checked before anything is decoded.
        self._check_limits(info)
        info.rotation = _rotation(self.path, self.limits)
        if info.rotation % 180:
            info.width, info.height = h, w
        return info

    def _duration(self, v) -> float:
        if v.duration is not None and v.time_base is not None:
            return float(v.duration * v.time_base)
        if self._container.duration is not None:
            return self._container.duration / av.time_base
        return 0.0

    def _check_limits(self, i: VideoInfo):
        lim = self.limits
        if max(i.width, i.height) > lim.max_side_px:
            raise InputTooLarge(self.path, f"resolution {i.width}x{i.height} is over the {lim.max_side_px} px limit "
                                        "(raise THEVAL_MAX_SIDE_PX or downscale the video)")
        if i.duration_s > lim.max_duration_s:
            raise InputTooLarge(self.path, f"duration {i.duration_s:.0f} s is over the {lim.max_duration_s:.0f} s "
                                        "limit (raise THEVAL_MAX_DURATION_S or split the video)")
        if i.width * i.height * i.header_frames > lim.max_pixels:
            raise InputTooLarge(self.path, f"{i.header_frames} frames of {i.width}x{i.height} are over the "
                                        f"{lim.max_pixels:.3g}-pixel budget (raise THEVAL_MAX_PIXELS, or "
                                        "downscale or split the video)")

    def _check_frame(self, frame):
        """The limits again on each decoded frame, before it is converted: a header can lie about
        the size (a new SPS mid-stream) or have no duration at all (a raw H.264 stream)."""
        lim, w, h, n = self.limits, frame.width, frame.height, self.frame_count + 1
        if max(w, h) > lim.max_side_px:
            raise InputTooLarge(self.path, f"decoded frame {n - 1} is {w}x{h} (the header says "
                                        f"{self.info.width}x{self.info.height}), over the {lim.max_side_px} px "
                                        "limit (raise THEVAL_MAX_SIDE_PX or downscale the video)")
        if n / self.info.fps > lim.max_duration_s:
            raise InputTooLarge(self.path, f"decoded more than {lim.max_duration_s:.0f} s of video ({n} frames at "
                                        f"{self.info.fps:g} fps), over the limit (raise THEVAL_MAX_DURATION_S "
                                        "or split the video)")
        self.pixels += w * h
        if self.pixels > lim.max_pixels:
            raise InputTooLarge(self.path, f"decoded more than {lim.max_pixels:.3g} pixels ({n} frames), over the "
                                        "budget (raise THEVAL_MAX_PIXELS, or downscale or split the video)")

    def _check_audio(self, audio: AudioGatherer):
        """Bounds the audio kept in memory, also when only the audio is decoded (read_audio).
        The 1 s margin: AAC priming and padding make a track a little longer than its video."""
        if audio.duration_s > self.limits.max_duration_s + 1.0:
            raise InputTooLarge(self.path, f"decoded more than {self.limits.max_duration_s:.0f} s of audio, over the "
                                        "limit (raise THEVAL_MAX_DURATION_S or split the video)")

    def _rgb(self, frame) -> np.ndarray:
        """The frame as RGB, turned upright as a player shows it."""
        rgb = frame.to_ndarray(format="rgb24")
        if self.info.rotation:
            rgb = np.ascontiguousarray(np.rot90(rgb, -self.info.rotation // 90))  # rot90 turns counter-clockwise
        return rgb

    def frames(self) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (index, RGB uint8 HxWx3) for every frame, gathering the audio on the way."""
        c = self._container
        v = c.streams.video[0]
        with_audio = self.info.has_audio and not self._audio_given
        streams = [v] + ([c.streams.audio[0]] if with_audio and not self._audio_problem else [])
        audio = self._gatherer()
        try:
            for packet in c.demux(*streams):
                for frame in packet.decode():
                    if packet.stream.type == "video":
                        self._check_frame(frame)
                        yield self.frame_count, self._rgb(frame)
                        self.frame_count += 1
                    else:
                        audio.add(frame)
                        self._check_audio(audio)
        except av.error.FFmpegError as err:
            raise VideoError(self.path, f"corrupt stream after {self.frame_count} frames ({err})") from err
        finally:
            self.close()
        if self.frame_count == 0:
            raise VideoError(self.path, "no decodable video frames")
        if with_audio:
            self.audio = audio.finish()

    def read_audio(self, cancelled=None) -> Audio | None:
        """Decode only the audio track (the silent-lip pass needs the speech before the frames);
        cancelled: backends.liveness, checked per audio frame."""
        if not self.info.has_audio:
            self.close()
            return None
        audio = self._gatherer()
        try:
            for frame in ([] if self._audio_problem else self._container.decode(audio=0)):
                check(cancelled)
                audio.add(frame)
                self._check_audio(audio)
        except av.error.FFmpegError as err:
            raise VideoError(self.path, f"corrupt audio stream ({err})") from err
        finally:
            self.close()
        return audio.finish()

    def _gatherer(self) -> AudioGatherer:
        audio = AudioGatherer(self.reference_audio, self.syncnet_audio)
        audio.problem = self._audio_problem
        return audio

    def close(self):
        self._container.close()


def read_all_frames(path, limits: Limits = Limits()) -> tuple[list[np.ndarray], MediaReader]:
    """Convenience for small clips and tests: every frame in memory."""
    reader = MediaReader(path, limits)
    frames = [f for _, f in reader.frames()]
    return frames, reader
