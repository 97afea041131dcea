"""From the series of one video to its 8 raw metrics, with a reason for every NaN and the
compute time of each (for the orchestrator's per-metric Prometheus histogram)."""
import time
from dataclasses import dataclass, field

import numpy as np

from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.core.frame_pass import FrameSeries
from theval_mesh.pure.metrics.eyebrow import eyebrow_dynamics
from theval_mesh.pure.metrics.head_motion import head_motion
from theval_mesh.pure.metrics.lip_dynamics import lip_dynamics
from theval_mesh.pure.metrics.lip_sync import MIN_SPEECH_RATIO, lip_sync, mouth_openness
from theval_mesh.pure.metrics.loudness import loudness_at
from theval_mesh.pure.metrics.profiles import REFERENCE
from theval_mesh.pure.metrics.quality import mean_score
from theval_mesh.pure.metrics.silent_lip import silent_lip_stability
from theval_mesh.pure.metrics.speech_frames import silent_frames, speech_mask
from theval_mesh.pure.scoring.names import KEYS
from theval_mesh.pure.settings import RunSettings

METRIC_KEYS = KEYS  # the engine's order, the reference CSV column order
# A std (or a variance of differences) over one or two samples is not a motion measure.
MIN_DYNAMIC_FRAMES = 3


@dataclass
class MetricValues:
    values: dict[str, float] = field(default_factory=dict)
    nan_reasons: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
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
            short = f"needs at least {MIN_DYNAMIC_FRAMES} frames, the video has {frames} with a face"
            if profile != REFERENCE:
                value, reason_if_nan = float("nan"), short
            elif not np.isnan(value):
                self.warnings.append(f"{key}: {short} (kept as the reference code computes it)")
        self.set(key, value, reason_if_nan, frames)


def _xy(points: np.ndarray, sx: float, sy: float) -> np.ndarray:
    return points[:, :, :2].astype(np.float64) * np.array([sx, sy])


def compute_metrics(fs: FrameSeries, pose: HeadPose, audio: AudioSeries, settings: RunSettings) -> MetricValues:
    """fs: landmarks and quality scores; pose: head pose of the single pass's frames."""
    m = MetricValues()
    single = fs.landmarks["single"]
    pts, idx = single.points, single.frame_index
    face = single.face_found()
    n_face = int(face.sum())
    w, h = fs.width, fs.height

    # Quality
    m.set("global_aesthetic", mean_score(fs.global_aesthetic), "no frames scored", len(fs.global_aesthetic))
    m.set("mouth_quality", mean_score(fs.mouth_quality), "no face found", len(fs.mouth_quality))
    m.set("face_quality", mean_score(fs.face_quality), "no face found", len(fs.face_quality))

    # Naturalness
    lip_series = fs.landmarks.get("lip_dynamics", single)
    m.set_dynamic("lip_dynamics", lip_dynamics(_xy(lip_series.points, 256, 256), settings.profile),
                  "fewer than 2 frames with a face", int(lip_series.face_found().sum()), settings.profile)
    m.set_dynamic("head_motion", head_motion(pose.pitch, pose.yaw, pose.roll, pose.cx, pose.cy,
                                             frame_size=(w, h) if settings.normalise_translation else None),
                  "no face found", n_face, settings.profile)
    m.set_dynamic("eyebrow_dynamics", eyebrow_dynamics(_xy(pts, w, h), settings.profile),
                  "fewer than 2 frames with a face", n_face, settings.profile)

    # Synchronisation
    if audio.rms is None:
        m.set("silent_lip_stability", np.nan, audio.problem or "no audio track", 0)
        m.set("lip_sync", np.nan, audio.problem or "no audio track", 0)
        return m
    total = fs.frame_count
    speech_all = speech_mask(audio.speech, fs.fps, total)
    # As the reference scripts count frames: silent-lip OpenCV's header count, lip-sync decord's
    # count of the frames themselves (stages._frame_count_warnings says when they differ).
    kept = silent_frames(audio.silence_speech, fs.fps, fs.header_frames or total)
    silent_series = fs.landmarks.get("silent_lip")
    if silent_series is None:
        rows = np.isin(idx, kept)
        silent_pts = _xy(pts[rows], 256, 256)
    else:
        silent_pts = _xy(silent_series.points, 256, 256)
    silent_value = silent_lip_stability(silent_pts, settings.profile)
    reason = ("no silence of at least 0.3 s" if len(kept) == 0
              else "fewer than 2 silent frames with a face")
    m.set("silent_lip_stability", silent_value, reason, int((~np.isnan(silent_pts[:, 0, 0])).sum()))

    sync_series = fs.landmarks.get("lip_sync", single)
    openness = mouth_openness(sync_series.points[:, :, :2])
    sync_idx = sync_series.frame_index
    loud = loudness_at(sync_idx / fs.fps, audio.rms, audio.rms_times)
    ratio = float(speech_all.mean()) if total else 0.0
    speech_used = speech_all[sync_idx]
    value = lip_sync(openness, loud, speech_used, ratio)
    reason = (f"speech covers {ratio:.0%} of the frames (under {MIN_SPEECH_RATIO:.0%})"
              if ratio < MIN_SPEECH_RATIO else "fewer than 2 speech frames with a face")
    m.set("lip_sync", value, reason, int((speech_used & ~np.isnan(openness)).sum()))
    return m
