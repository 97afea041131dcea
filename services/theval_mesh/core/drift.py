"""Temporal drift (beyond THEval; the paper notes quality degrading over long generations): the
quality and motion metrics per time window of a long video, each window's value computed by the
metric's own code on the window's frames, and a flag where a window moved away from the first
window by more than their 95 % intervals allow.

A window's interval comes from its 1-second blocks: the metric computed on each block, the spread
of those replicates giving the standard error of the window's value (blocks, not frames, so the
frame-to-frame dependence of the dynamics stays inside a replicate). A flag: the interval of the
difference from the first window, +-1.96 sqrt(se_w^2 + se_1^2), excludes 0. Synchronisation
metrics are left out: a window holds too little speech and silence for them.
"""
import math
from dataclasses import replace

import numpy as np

from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.core.trace import quality_frames
from theval_mesh.pure.metrics.registry import NATURALNESS, QUALITY, REGISTRY

WINDOW_S = 5.0
BLOCK_S = 1.0
Z95 = 1.96
DRIFT_METRICS = tuple(m for m in REGISTRY if m.group in (QUALITY, NATURALNESS))


def _sliced(video, keep_frames: np.ndarray, qframes: dict, points: dict):
    """The video restricted to the frames in keep_frames (a bool mask over frame numbers).
    points: each landmark pass's (frame_index, points), stacked once."""
    landmarks = {name: LandmarkSeries.from_arrays(index[keep_frames[index]], pts[keep_frames[index]])
                 for name, (index, pts) in points.items()}
    single = keep_frames[points["single"][0]]
    quality = {key: [s for s, f in zip(getattr(video.fs, key), frames) if keep_frames[f]]
               for key, frames in qframes.items()}
    p = video.pose
    pose = HeadPose(p.pitch[single], p.yaw[single], p.roll[single], p.cx[single], p.cy[single])
    return type(video)(replace(video.fs, landmarks=landmarks, **quality), pose, video.audio, video.settings)


def _values(video, arguments, keep_frames, qframes, points) -> dict[str, float]:
    part = _sliced(video, keep_frames, qframes, points)
    out = {}
    for metric in DRIFT_METRICS:
        if metric.group == QUALITY and metric.key not in qframes:
            continue  # its scores cannot be placed on frames (core.trace.quality_frames)
        args, frames, _ = arguments(part, metric)
        out[metric.key] = float(metric.function(*args)) if args is not None and frames >= 2 else math.nan
    return out


def temporal_drift(video, arguments, window_s: float = WINDOW_S) -> dict:
    """{} for a video of at most two windows; else {window_s, windows: [[start, end], ...],
    values: {key: [per window]}, ci: {key: [[low, high], ...]}, flags: [sentences]}."""
    fs = video.fs
    n = fs.frame_count
    if not fs.fps or n / fs.fps <= 2 * window_s:
        return {}
    qframes = quality_frames(fs, video.settings.profile)
    points = {name: (series.frame_index, series.points) for name, series in fs.landmarks.items()}
    times = np.arange(n) / fs.fps
    windows = [(t, min(t + window_s, n / fs.fps)) for t in np.arange(0, n / fs.fps, window_s)]
    if windows[-1][1] - windows[-1][0] < window_s / 2:  # a short tail joins the window before it
        windows[-2:] = [(windows[-2][0], windows[-1][1])]
    values, ci = {m.key: [] for m in DRIFT_METRICS}, {m.key: [] for m in DRIFT_METRICS}
    errors = {m.key: [] for m in DRIFT_METRICS}
    for start, end in windows:
        whole = _values(video, arguments, (times >= start) & (times < end), qframes, points)
        blocks = [_values(video, arguments, (times >= b) & (times < min(b + BLOCK_S, end)), qframes, points)
                  for b in np.arange(start, end, BLOCK_S)]
        for key in values:
            value = whole.get(key, math.nan)
            replicates = np.array([b.get(key, math.nan) for b in blocks])
            replicates = replicates[np.isfinite(replicates)]
            se = float(replicates.std(ddof=1) / math.sqrt(len(replicates))) if len(replicates) > 1 else math.nan
            values[key].append(value)
            errors[key].append(se)
            ci[key].append([value - Z95 * se, value + Z95 * se])
    flags = []
    for metric in DRIFT_METRICS:
        v, se = values[metric.key], errors[metric.key]
        for w in range(1, len(windows)):
            bound = Z95 * math.hypot(se[w], se[0])
            if all(map(math.isfinite, (v[w], v[0], bound))) and abs(v[w] - v[0]) > bound:
                flags.append(f"{metric.name} drifts in {windows[w][0]:.0f}-{windows[w][1]:.0f} s: "
                             f"{v[w]:.4g} against {v[0]:.4g} in the first {window_s:.0f} s "
                             f"(difference beyond its 95 % interval, +-{bound:.2g})")
    return {"window_s": window_s, "windows": [[float(a), float(b)] for a, b in windows],
            "values": values, "ci": ci, "flags": flags}
