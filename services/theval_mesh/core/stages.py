"""The stages of scoring one video and their ONE composition.

`score()` is shared by the embedded engine (LocalVideo: in-process backends, one decode feeding
FaceMesh, the quality models and the audio) and the mesh evaluator (rpc.remote_stages:
gRPC clients of the landmarks, audio, head-pose and quality services). Both therefore build
results the same way: same NaN reasons, same no-face and no-audio handling, same provenance.

Data flow: audio (started first; in the mesh it runs beside the landmark pass) -> landmarks ->
quality (may run beside head pose) -> metric math.
"""
import time
from typing import Protocol

import numpy as np

from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.backends.headpose.backend import estimate as estimate_head_pose
from theval_mesh.backends.media.decode import MediaReader, VideoInfo
from theval_mesh.core.compute import compute_metrics
from theval_mesh.core.frame_pass import FrameSeries, run_frame_pass
from theval_mesh.core.incidents import logged_internal
from theval_mesh.core.results import FAILED, OK, VideoResult
from theval_mesh.pure.errors import Cancelled, ServiceError, UserError, VideoError
from theval_mesh.pure.metrics.head_motion import reference_drop_reason
from theval_mesh.pure.metrics.profiles import REFERENCE
from theval_mesh.pure.metrics.registry import LIP_SYNC
from theval_mesh.pure.metrics.speech_frames import silent_frames
from theval_mesh.pure.settings import RunSettings


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

    def head_pose(self, series: FrameSeries, width: int, height: int) -> HeadPose:
        """Head pose of the used frames: FaceXFormer's, gathered by the frame pass, or the rigid
        fit of the single pass's landmarks."""

    def close(self):
        """Release what the video holds (called once scored or failed)."""


def new_result(model: str, video, settings: RunSettings, provenance: dict) -> VideoResult:
    return VideoResult(model=model, video=str(video), status=OK, settings=settings.key(),
                       provenance=provenance)


def score(open_video, result: VideoResult, settings: RunSettings, on_frames=None) -> VideoError | None:
    """Fill `result` from the stages `open_video()` returns. Whatever goes wrong with this video
    fails this video only: its VideoError is recorded in `result` and returned (None on success).
    An unexpected error is logged under an id (core.incidents) and becomes a VideoError naming
    that id only. What is not about this video propagates: the mesh's own failures
    (ServiceError), the caller gone (Cancelled), a problem of the request (other UserErrors)."""
    start = time.perf_counter()
    error = None
    try:
        video = open_video()
        try:
            _compose(video, settings, result, on_frames)
        finally:
            video.close()
    except VideoError as err:
        error = err
    except (ServiceError, Cancelled, UserError):
        raise
    except Exception as err:  # noqa: BLE001 - one video must never take the batch down
        error = VideoError(result.video, logged_internal(err, f"scoring {result.video}"))
    if error is not None:
        result.status, result.reason = FAILED, error.reason
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
    if not s.single_pass and info.has_audio:
        # The reference's silent-lip pass tracks only silent frames, which must be known
        # before the landmark pass.
        silent = silent_frames(audio.result().silence_speech or [], info.fps, info.header_frames)
        clock.lap("audio")
    if on_frames:
        on_frames(0, total=info.header_frames or None)  # a frames bar's total, before the first frame
    series = video.landmarks(silent, on_frames)
    clock.lap("landmarks")
    single = series.landmarks["single"]
    result.frames_total, result.frames_used = series.frame_count, len(single.frame_index)
    result.face_frames = int(single.face_found().sum())
    result.warnings.extend(_frame_count_warnings(info, series.frame_count))
    result.provenance = {**result.provenance, "frame_counts": {
        "decoded": series.frame_count, "header": info.header_frames,
        LIP_SYNC.key: "decoded (decord's count)", "silent_lip": "header (OpenCV's count)"}}
    if result.face_frames == 0:
        if s.profile != REFERENCE:
            raise VideoError(info.path, f"no face found in any of the {result.frames_used} frames used")
        # The reference scripts still score such a video: global aesthetic (and face quality) on
        # the full frames, 0.0 for lip dynamics and eyebrow dynamics (Naturalness/lip_dynamics.py
        # lines 85-90, eyebrow_dynamics.py lines 126-131 at 3603338), the rest NaN.
        result.warnings.append(f"no face found in any of the {result.frames_used} frames used: scored as "
                               "the reference code scores it (lip and eyebrow dynamics 0.0)")
    quality = video.quality(series)
    pose = video.head_pose(series, info.width, info.height)
    clock.lap("head_pose")
    series = quality.result()
    clock.lap("quality")
    audio_series = audio.result()
    clock.lap("audio")
    if audio_series.rms is None:
        result.warnings.append(audio_series.problem or ("audio track is empty" if info.has_audio
                               else "no audio track: synchronisation metrics are NaN"))
    values = compute_metrics(series, pose, audio_series, s)
    result.metrics, result.nan_reasons, result.counts = values.values, values.nan_reasons, values.counts
    result.av_offset, result.trace, result.drift = values.av_offset, values.trace, values.drift
    result.warnings.extend(values.warnings)
    result.timings.update({f"metric:{k}": round(v, 6) for k, v in values.seconds.items()})


def _frame_count_warnings(info: VideoInfo, decoded: int) -> list[str]:
    """Where the reference scripts would count frames differently (docs/metrics.md: frame counts)."""
    out = []
    if info.header_frames != decoded:
        out.append(f"the header announces {info.header_frames} frames but {decoded} were decoded (a wrong "
                   "header or variable frame rate): lip-sync counts the decoded frames (as the "
                   "reference's decord), silent-lip the header's (as its OpenCV)")
    if abs(info.guessed_fps - info.fps) > 0.01 * info.fps:
        out.append(f"variable frame rate: average {info.fps:.3f} fps, base {info.guessed_fps:.3f} fps; "
                   "frame times are taken as index / average fps, as the reference does")
    return out


def facexformer_pose(series: FrameSeries, profile: str) -> HeadPose:
    """HeadPose from the frame pass's FaceXFormer rows. Profile reference scores the frames the
    reference's script reads and drops the whole video when one of them has no face
    (pure.metrics.head_motion.reference_drop_reason); paper drops only the face-less frames."""
    rows = series.head_pose.copy()
    dropped = None
    if profile == REFERENCE and len(rows) == series.frame_count:  # every frame used (stride 1)
        n, dropped = reference_drop_reason(~np.isnan(rows[:, 0]), series.frame_count, series.header_frames)
        rows[n:] = np.nan
    return HeadPose(*rows.T, dropped=dropped)


def analyse_audio(backend, audio, profile: str, cancelled=None) -> AudioSeries:
    """The audio stage on decoded audio (None: no track): empty or unusable tracks give no series."""
    if audio is None or not len(audio.samples):
        return AudioSeries(problem=audio.problem if audio is not None else None)
    return backend.analyse(audio, profile, cancelled=cancelled)


class LocalVideo:
    """The embedded stages: ONE decode feeds FaceMesh, the quality models and the audio."""

    def __init__(self, path, settings: RunSettings, audio_backend, quality_backend, headpose_backend=None,
                 cancelled=None):
        """cancelled: backends.liveness, checked per decoded frame (None: never cancelled)."""
        self.path, self.settings, self.cancelled = path, settings, cancelled
        self.audio_backend, self.quality_backend = audio_backend, quality_backend
        self.headpose_backend = headpose_backend
        self.reader = self._reader()
        self.info = self.reader.info
        self._decoded = False

    def _reader(self) -> MediaReader:
        return MediaReader(self.path, self.settings.limits, reference_audio=self.settings.profile == REFERENCE)

    def audio(self) -> Handle:
        return Later(self._audio)

    def _audio(self) -> AudioSeries:
        profile = self.settings.profile
        if self._decoded:  # gathered by the frame pass
            return analyse_audio(self.audio_backend, self.reader.audio, profile)
        # Needed before the frame pass (the silent-lip pass): decode the audio track alone, once;
        # the frame pass then decodes the video stream only.
        audio = self._reader().read_audio(self.cancelled)
        self.reader.use_audio(audio)
        return analyse_audio(self.audio_backend, audio, profile)

    def landmarks(self, silent, on_frames=None) -> FrameSeries:
        series = run_frame_pass(self.reader, self.settings, self.quality_backend, silent_frames=silent,
                                on_frames=on_frames, cancelled=self.cancelled,
                                headpose_backend=self.headpose_backend)
        self._decoded = True
        return series

    def quality(self, series: FrameSeries) -> Handle:
        return Done(series)  # scored during the frame pass

    def head_pose(self, series, width, height) -> HeadPose:
        if series.head_pose is None:
            return estimate_head_pose(series.landmarks["single"].points, width, height)
        return facexformer_pose(series, self.settings.profile)

    def close(self):
        self.reader.close()
