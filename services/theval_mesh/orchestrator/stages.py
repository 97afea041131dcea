"""The stages of scoring one video and their ONE composition.

`score()` is shared by the embedded engine (LocalVideo: in-process backends, one decode feeding
FaceMesh, the quality models and the audio) and the mesh evaluator (orchestrator.remote_stages:
gRPC clients of the landmarks, audio, head-pose and quality services). Both therefore build
results the same way: same NaN reasons, same no-face and no-audio handling, same provenance.

Data flow: audio (started first; in the mesh it runs beside the landmark pass) -> landmarks ->
quality (may run beside head pose) -> metric math.
"""
import time
import traceback
from typing import Protocol

import av

from ..audio.series import AudioSeries
from ..common.errors import VideoError
from ..headpose.backend import HeadPose
from ..headpose.backend import estimate as estimate_head_pose
from ..media.decode import MediaReader, VideoInfo
from ..metrics.speech_frames import silent_frames
from .compute import compute_metrics
from .frame_pass import FrameSeries, run_frame_pass
from .results import FAILED, OK, VideoResult
from .settings import RunSettings


class Handle(Protocol):
    """A stage's output that may still be in progress (a Future, or Done/Later below)."""

    def result(self): ...


class Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class Later:
    """Computed on the first result() call."""

    def __init__(self, fn):
        self.fn, self.done, self.value = fn, False, None

    def result(self):
        if not self.done:
            self.value, self.done = self.fn(), True
        return self.value


class VideoStages(Protocol):
    """The stages for ONE video (opened and validated on construction)."""
    info: VideoInfo

    def audio(self) -> Handle:
        """AudioSeries; rms None when the file has no audio samples."""

    def landmarks(self, silent: list[int] | None, on_frames=None) -> FrameSeries:
        """The FaceMesh passes (and the quality scores too, where they share the decode)."""

    def quality(self, series: FrameSeries) -> Handle:
        """`series` with its quality scores."""

    def head_pose(self, points, width: int, height: int) -> HeadPose: ...


def new_result(model: str, video, settings: RunSettings, provenance: dict) -> VideoResult:
    return VideoResult(model=model, video=str(video), status=OK, settings=settings.key(),
                       provenance=provenance)


def score(open_video, result: VideoResult, settings: RunSettings, on_frames=None):
    """Fill `result` from the stages `open_video()` returns. A bad video fails this video only:
    its error is recorded in `result` and returned (None on success). Errors of the mesh itself
    (common.errors.ServiceError) propagate."""
    start = time.perf_counter()
    error = None
    try:
        _compose(open_video(), settings, result, on_frames)
    except VideoError as err:
        result.status, result.reason, error = FAILED, err.reason, err
    except (av.error.FFmpegError, MemoryError, ValueError, RuntimeError) as err:
        # Unexpected, but one video must never take the batch down: record and go on.
        result.status = FAILED
        result.reason = f"internal error: {type(err).__name__}: {err}"
        result.warnings.append(traceback.format_exc(limit=3))
        error = err
    result.seconds = round(time.perf_counter() - start, 3)
    return error


class _Clock:
    """Wall time of each stage as the composition sees it. Embedded, the frame pass scores quality
    as it decodes, so "landmarks" holds both; in the mesh, a stage that ran beside another shows
    only the time its result was still awaited."""

    def __init__(self, timings: dict):
        self.timings, self.last = timings, time.perf_counter()

    def lap(self, stage: str):
        now = time.perf_counter()
        self.timings[stage] = round(self.timings.get(stage, 0.0) + now - self.last, 6)
        self.last = now


def _compose(video: VideoStages, s: RunSettings, result: VideoResult, on_frames):
    info = video.info
    clock = _Clock(result.timings)
    result.fps, result.width, result.height = info.fps, info.width, info.height
    audio = video.audio()
    silent = None
    if s.exact_reference and info.has_audio:
        # The reference's silent-lip pass tracks only silent frames, which must be known
        # before the landmark pass.
        silent = silent_frames(audio.result().speech or [], info.fps, _frame_estimate(info))
        clock.lap("audio")
    series = video.landmarks(silent, on_frames)
    clock.lap("landmarks")
    single = series.landmarks["single"]
    result.frames_total, result.frames_used = series.frame_count, len(single.frame_index)
    result.face_frames = int(single.face_found().sum())
    if result.face_frames == 0:
        raise VideoError(info.path, f"no face found in any of the {result.frames_used} frames used")
    quality = video.quality(series)
    pose = video.head_pose(single.points, info.width, info.height)
    clock.lap("head_pose")
    series = quality.result()
    clock.lap("quality")
    audio_series = audio.result()
    clock.lap("audio")
    if audio_series.rms is None:
        result.warnings.append("audio track is empty" if info.has_audio
                               else "no audio track: synchronisation metrics are NaN")
    values = compute_metrics(series, pose, audio_series, s)
    result.metrics, result.nan_reasons, result.counts = values.values, values.nan_reasons, values.counts
    result.timings.update({f"metric:{k}": round(v, 6) for k, v in values.seconds.items()})


def _frame_estimate(info) -> int:
    return int(round(info.duration_s * info.fps))


def analyse_audio(backend, audio) -> AudioSeries:
    """The audio stage on decoded audio (None: no track): empty tracks give no series."""
    if audio is None or not len(audio.samples):
        return AudioSeries()
    return backend.analyse(audio)


class LocalVideo:
    """The embedded stages: ONE decode feeds FaceMesh, the quality models and the audio."""

    def __init__(self, path, settings: RunSettings, audio_backend, quality_backend):
        self.path, self.settings = path, settings
        self.audio_backend, self.quality_backend = audio_backend, quality_backend
        self.reader = MediaReader(path, settings.limits)
        self.info = self.reader.info
        self._decoded = False

    def audio(self) -> Handle:
        return Later(self._audio)

    def _audio(self) -> AudioSeries:
        if self._decoded:  # gathered by the frame pass
            return analyse_audio(self.audio_backend, self.reader.audio)
        # Needed before the frame pass (exact-reference mode): decode the audio track alone.
        return analyse_audio(self.audio_backend, MediaReader(self.path, self.settings.limits).read_audio())

    def landmarks(self, silent, on_frames=None) -> FrameSeries:
        series = run_frame_pass(self.reader, self.settings, self.quality_backend, silent_frames=silent,
                                on_frames=on_frames)
        self._decoded = True
        return series

    def quality(self, series: FrameSeries) -> Handle:
        return Done(series)  # scored during the frame pass

    def head_pose(self, points, width, height) -> HeadPose:
        return estimate_head_pose(points, width, height)
