"""A video's signals over time, kept small for the report (`theval report`): what a reader looks at
to see why a metric came out as it did. Display only: no metric is computed from a trace.

Every series is sampled at the same at most TRACE_POINTS frames (evenly spread, real frames, no
averaging) and rounded to SIGNIFICANT digits; a frame without a face is NaN. Keys:
  frame, t                      the sampled frames' indices and times (s)
  mouth_openness, loudness      lip-sync's two signals (its own landmark pass; RMS at frame time)
  pitch, yaw, roll              head angles (degrees)
  eyebrow                       brow-to-eye distance over eye distance, mean of both sides
  global_aesthetic, face_quality, mouth_quality   each quality model's score of the frame
  speech                        the VAD's speech segments lip-sync uses, flattened [s0, e0, s1, e1, ...]
  worst_<quality key>           frame indices of the WORST_FRAMES lowest scores (all frames, not
                                only the sampled ones), for the report's thumbnails
"""
import numpy as np

from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.backends.landmarks import passes
from theval_mesh.core.frame_pass import FrameSeries
from theval_mesh.pure.metrics.eyebrow import brow_distances
from theval_mesh.pure.metrics.lip_sync import mouth_openness
from theval_mesh.pure.metrics.loudness import loudness_at
from theval_mesh.pure.metrics.profiles import REFERENCE
from theval_mesh.pure.metrics.registry import FACE_QUALITY, GLOBAL_AESTHETIC, LIP_SYNC, MOUTH_QUALITY

TRACE_POINTS = 240  # a 10 s clip at 24 fps keeps every frame; 1,000 videos' traces ~ 20 MB of JSON
SIGNIFICANT = 4
WORST_FRAMES = 3


def _round(values) -> list[float]:
    """SIGNIFICANT digits; NaN stays NaN (the JSON writers turn it into null)."""
    out = []
    for v in np.asarray(values, dtype=np.float64):
        out.append(float(f"{v:.{SIGNIFICANT}g}") if np.isfinite(v) else float("nan"))
    return out


def _eyebrow(points_px: np.ndarray) -> np.ndarray:
    """Per frame (NaN without a face): the eyebrow metric's distance, mean of the two sides."""
    out = np.full(len(points_px), np.nan)
    for k, frame in enumerate(points_px):
        d = brow_distances(frame[None])
        if len(d):
            out[k] = d[0].mean()
    return out


def quality_frames(fs: FrameSeries, profile: str) -> dict[str, np.ndarray]:
    """The frame index behind each quality score: the frame pass scores global aesthetic on every
    used frame, face quality on every used frame (reference: the full frame) or on each frame with a
    face (paper: its crop), mouth quality on each frame whose mouth pass found a face. A list whose
    length does not match (a crop wholly outside the frame scores nothing) is not mapped."""
    single = fs.landmarks["single"]
    used, with_face = single.frame_index, single.frame_index[single.face_found()]
    mouth = fs.landmarks.get(passes.MOUTH_QUALITY.name, single)
    expected = {GLOBAL_AESTHETIC.key: used, FACE_QUALITY.key: used if profile == REFERENCE else with_face,
                MOUTH_QUALITY.key: mouth.frame_index[mouth.face_found()]}
    return {key: frames for key, frames in expected.items() if len(frames) == len(getattr(fs, key))}


def video_trace(fs: FrameSeries, pose: HeadPose, audio: AudioSeries, profile: str) -> dict[str, list[float]]:
    single = fs.landmarks["single"]
    frames = single.frame_index
    if not len(frames) or not fs.fps:
        return {}
    pick = np.unique(np.linspace(0, len(frames) - 1, min(TRACE_POINTS, len(frames))).round().astype(int))
    times = frames / fs.fps
    trace = {"frame": frames[pick].astype(float).tolist(), "t": _round(times[pick])}

    lips = fs.landmarks.get(LIP_SYNC.key, single)  # lip-sync's own pass, on the single pass's frames
    openness = np.full(len(frames), np.nan)
    mine, theirs = np.intersect1d(frames, lips.frame_index, assume_unique=True, return_indices=True)[1:]
    openness[mine] = mouth_openness(lips.points[theirs, :, :2])
    trace["mouth_openness"] = _round(openness[pick])
    if audio.rms is not None:
        trace["loudness"] = _round(loudness_at(times[pick], audio.rms, audio.rms_times))
        trace["speech"] = [float(x) for segment in (audio.speech or []) for x in segment]

    if len(pose.pitch) == len(frames):
        for name in ("pitch", "yaw", "roll"):
            trace[name] = _round(getattr(pose, name)[pick])
    points_px = single.points[pick, :, :2].astype(np.float64) * np.array([fs.width, fs.height])
    trace["eyebrow"] = _round(_eyebrow(points_px))

    for key, scored in quality_frames(fs, profile).items():
        scores = np.asarray(getattr(fs, key), dtype=np.float64)
        at = dict(zip(scored.tolist(), scores))
        trace[key] = _round([at.get(int(f), np.nan) for f in frames[pick]])
        trace[f"worst_{key}"] = scored[np.argsort(scores, kind="stable")[:WORST_FRAMES]].astype(float).tolist()
    return trace
