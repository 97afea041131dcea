"""From the series of one video to its 8 raw metrics, with a reason for every NaN and the
compute time of each (for the orchestrator's per-metric Prometheus histogram)."""
import time
from dataclasses import dataclass, field

import numpy as np

from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.core.drift import temporal_drift
from theval_mesh.core.frame_pass import FrameSeries
from theval_mesh.core.trace import video_trace
from theval_mesh.pure.metrics.av_offset import av_offset
from theval_mesh.pure.metrics.lip_sync import MIN_SPEECH_RATIO, mouth_openness
from theval_mesh.pure.metrics.loudness import loudness_at
from theval_mesh.pure.metrics.profiles import REFERENCE
from theval_mesh.pure.metrics.registry import (
    EMPTY,
    EYEBROW_DYNAMICS,
    FACE_QUALITY,
    GLOBAL_AESTHETIC,
    HEAD_MOTION,
    LIP_DYNAMICS,
    LIP_SYNC,
    LITTLE_SPEECH,
    MIN_DYNAMIC_FRAMES,
    MOUTH_QUALITY,
    NATURALNESS,
    NO_AUDIO,
    NO_SILENCE,
    REGISTRY,
    SILENT_LIP_STABILITY,
    TOO_FEW_FRAMES,
    Metric,
)
from theval_mesh.pure.metrics.speech_frames import silent_frames, speech_mask
from theval_mesh.pure.settings import RunSettings


@dataclass
class MetricValues:
    values: dict[str, float] = field(default_factory=dict)
    nan_reasons: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    av_offset: dict[str, float] = field(default_factory=dict)
    trace: dict[str, list[float]] = field(default_factory=dict)  # core.trace: for the report
    drift: dict = field(default_factory=dict)  # core.drift: metrics per window of a long video
    _since: float = field(default_factory=time.perf_counter)

    def set(self, key: str, value: float, reason_if_nan: str, frames: int):
        """Record one metric; its compute time is the time since the previous set()."""
        now = time.perf_counter()
        self.seconds[key], self._since = now - self._since, now
        self.values[key] = float(value)
        self.counts[key] = int(frames)
        if np.isnan(value):
            self.nan_reasons[key] = reason_if_nan

    def set_dynamic(self, key: str, value: float, reason_if_nan: str, frames: int, profile: str):
        """A dynamics metric over `frames` frames with a face. Under MIN_DYNAMIC_FRAMES, `paper`
        gives NaN with the reason; `reference` keeps the reference code's number, with the reason
        as a warning."""
        if frames < MIN_DYNAMIC_FRAMES:
            short = TOO_FEW_FRAMES.format(frames=frames)
            if profile != REFERENCE:
                value, reason_if_nan = float("nan"), short
            elif not np.isnan(value):
                self.warnings.append(f"{key}: {short} (kept as the reference code computes it)")
        self.set(key, value, reason_if_nan, frames)


def _xy(points: np.ndarray, sx: float, sy: float) -> np.ndarray:
    return points[:, :, :2].astype(np.float64) * np.array([sx, sy])


@dataclass
class _Video:
    """What one video's metrics are computed from. fs: landmarks and quality scores; pose: head
    pose of the single pass's frames."""
    fs: FrameSeries
    pose: HeadPose
    audio: AudioSeries
    settings: RunSettings

    def __post_init__(self):
        self.single = self.fs.landmarks["single"]
        self.n_face = int(self.single.face_found().sum())

    def own_pass(self, metric: Metric):
        """The landmarks of the metric's own reference pass (named after it, landmarks/passes.py),
        else of the single pass."""
        return self.fs.landmarks.get(metric.key, self.single)


# Each metric's arguments from a video, found by its key in _ARGUMENTS: (arguments, or None when
# the value is NaN without computing it; frames behind the value; the reason it carries if NaN).
def _quality(v: _Video, metric: Metric):
    scores = getattr(v.fs, metric.key)  # FrameSeries keeps each quality metric's scores under its key
    return (scores,), len(scores), metric.reason(EMPTY)


def _lip_dynamics(v: _Video, metric: Metric):
    series = v.own_pass(metric)
    return ((_xy(series.points, 256, 256), v.settings.profile), int(series.face_found().sum()),
            metric.reason(EMPTY))


def _head_motion(v: _Video, metric: Metric):
    p, fs = v.pose, v.fs
    if p.dropped:
        return None, 0, p.dropped
    frame_size = (fs.width, fs.height) if v.settings.normalise_translation else None
    return ((p.pitch, p.yaw, p.roll, p.cx, p.cy, frame_size), int((~np.isnan(p.pitch)).sum()),
            metric.reason(EMPTY))


def _eyebrow_dynamics(v: _Video, metric: Metric):
    return ((_xy(v.single.points, v.fs.width, v.fs.height), v.settings.profile), v.n_face,
            metric.reason(EMPTY))


def _silent_lip(v: _Video, metric: Metric):
    if v.audio.rms is None:
        return None, 0, v.audio.problem or metric.reason(NO_AUDIO)
    fs = v.fs
    # As the reference scripts count frames: silent-lip OpenCV's header count, lip-sync decord's
    # count of the frames themselves (stages._frame_count_warnings says when they differ).
    kept = silent_frames(v.audio.silence_speech, fs.fps, fs.header_frames or fs.frame_count)
    silent_series = fs.landmarks.get("silent_lip")
    if silent_series is None:
        points = _xy(v.single.points[np.isin(v.single.frame_index, kept)], 256, 256)
    else:
        points = _xy(silent_series.points, 256, 256)
    return ((points, v.settings.profile), int((~np.isnan(points[:, 0, 0])).sum()),
            metric.reason(NO_SILENCE if len(kept) == 0 else EMPTY))


def _lip_sync(v: _Video, metric: Metric):
    if v.audio.rms is None:
        return None, 0, v.audio.problem or metric.reason(NO_AUDIO)
    fs, total = v.fs, v.fs.frame_count
    speech_all = speech_mask(v.audio.speech, fs.fps, total)
    series = v.own_pass(metric)
    openness = mouth_openness(series.points[:, :, :2])
    loud = loudness_at(series.frame_index / fs.fps, v.audio.rms, v.audio.rms_times)
    ratio = float(speech_all.mean()) if total else 0.0
    speech_used = speech_all[series.frame_index]
    reason = metric.reason(LITTLE_SPEECH, ratio=ratio) if ratio < MIN_SPEECH_RATIO else metric.reason(EMPTY)
    return (openness, loud, speech_used, ratio), int((speech_used & ~np.isnan(openness)).sum()), reason


def _av_offset(v: _Video) -> dict:
    """The audio's offset from the picture, over the lip-sync metric's own frames and speech."""
    if v.audio.rms is None:
        return {}
    series = v.own_pass(LIP_SYNC)
    found = av_offset(mouth_openness(series.points[:, :, :2]), series.frame_index / v.fs.fps, v.audio.rms,
                      v.audio.rms_times, speech_mask(v.audio.speech, v.fs.fps, v.fs.frame_count)[series.frame_index])
    return {} if np.isnan(found.ms) else {"ms": found.ms, "confidence": found.confidence, "peak": found.peak,
                                          "frames": float(found.frames)}


_ARGUMENTS = {GLOBAL_AESTHETIC.key: _quality, MOUTH_QUALITY.key: _quality, FACE_QUALITY.key: _quality,
              LIP_DYNAMICS.key: _lip_dynamics, HEAD_MOTION.key: _head_motion,
              EYEBROW_DYNAMICS.key: _eyebrow_dynamics, SILENT_LIP_STABILITY.key: _silent_lip, LIP_SYNC.key: _lip_sync}


def metric_arguments(video: _Video, metric: Metric):
    """(the arguments of metric.function, or None; the frames behind the value; the reason if NaN)."""
    return _ARGUMENTS[metric.key](video, metric)


def compute_metrics(fs: FrameSeries, pose: HeadPose, audio: AudioSeries, settings: RunSettings) -> MetricValues:
    """Every metric of the registry, in its order, each timed."""
    m = MetricValues()
    video = _Video(fs, pose, audio, settings)
    for metric in REGISTRY:
        arguments, frames, reason = metric_arguments(video, metric)
        value = np.nan if arguments is None else metric.function(*arguments)
        if metric.group == NATURALNESS:  # motion measures: see set_dynamic
            m.set_dynamic(metric.key, value, reason, frames, settings.profile)
        else:
            m.set(metric.key, value, reason, frames)
    m.av_offset = _av_offset(video)
    m.trace = video_trace(fs, pose, audio, settings.profile)
    m.drift = temporal_drift(video, metric_arguments)
    return m
