"""Conversions between the theval.v1 messages and the engine's arrays and records.

Float series travel as packed repeated fields, bit-exact: landmarks as float32, everything the
backends compute in float64 as double. Filling or reading a repeated field element by element
costs ~25 ms per 100k floats with protobuf's upb runtime, so arrays are written and read as
the packed field's wire bytes (tag, length, little-endian values), which is ~1 ms.
"""
import json

import numpy as np

from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.backends.media.decode import VideoInfo
from theval_mesh.core.results import VideoResult, in_metric_order, json_safe
from theval_mesh.pure.scoring.final_score import Leaderboard
from theval_mesh.pure.settings import SETTINGS, RunSettings
from theval_mesh.rpc.protocol import RESULT_TRAILER
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2

_WIRE_DTYPE = {"float": np.dtype("<f4"), "double": np.dtype("<f8")}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def _dtype(message, name: str):
    f = message.DESCRIPTOR.fields_by_name[name]
    return f, _WIRE_DTYPE["float" if f.type == f.TYPE_FLOAT else "double"]


def set_array(message, name: str, values):
    """message.<name> (a repeated float/double field) := values, exactly."""
    f, dtype = _dtype(message, name)
    values = np.asarray(values)
    message.ClearField(name)
    if values.size:
        # The field's bytes written once, straight from the array: a landmark series is ~90 MB
        # for a 600 s clip, and copies of it are what a leaf's memory is made of.
        size = values.size * dtype.itemsize
        header = _varint(f.number << 3 | 2) + _varint(size)
        data = bytearray(len(header) + size)
        data[:len(header)] = header
        np.frombuffer(data, dtype, offset=len(header)).reshape(values.shape)[...] = values
        message.MergeFromString(memoryview(data))


def get_array(message, name: str) -> np.ndarray:
    """message.<name> as a numpy array (float32 or float64), exactly."""
    f, dtype = _dtype(message, name)
    data = message.SerializeToString()
    view = memoryview(data)  # slices of it copy nothing: a series is read with one copy beyond this
    chunks, pos = [], 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, kind = key >> 3, key & 7
        if kind == 0:
            _, pos = _read_varint(data, pos)
        elif kind == 1:
            pos += 8
        elif kind == 5:
            if number == f.number:  # an unpacked element (never written by protobuf's own serializer)
                chunks.append(view[pos:pos + 4])
            pos += 4
        elif kind == 2:
            length, pos = _read_varint(data, pos)
            if number == f.number:
                chunks.append(view[pos:pos + length])
            pos += length
        else:
            raise ValueError(f"unexpected wire type {kind} in {message.DESCRIPTOR.full_name}")
    packed = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return np.frombuffer(packed, dtype=dtype).astype(dtype.newbyteorder("="), copy=True)


# ------------------------------------------------------------------ settings and video info
def settings_to_proto(s: RunSettings) -> common_pb2.RunSettings:
    return common_pb2.RunSettings(**{x.name: getattr(s, x.name) for x in SETTINGS})


def settings_from_proto(m: common_pb2.RunSettings, default: RunSettings, limits) -> RunSettings:
    """An empty string, 0 or false is `default`'s value (the proto's contract), for every setting.
    ValueError for a bad profile, quality mode or stride (the caller's INVALID_ARGUMENT)."""
    return RunSettings(**{x.name: getattr(m, x.name) or getattr(default, x.name) for x in SETTINGS}, limits=limits)


def info_to_proto(i: VideoInfo) -> common_pb2.VideoInfo:
    return common_pb2.VideoInfo(width=i.width, height=i.height, fps=i.fps, duration_s=i.duration_s,
                                has_audio=i.has_audio, codec=i.codec)


# ------------------------------------------------------------------ series
def landmarks_to_proto(name: str, s: LandmarkSeries, into=None) -> common_pb2.LandmarkSeries:
    """The series as a message; into: a message to fill in place (e.g. a repeated field's new one,
    so the series is not copied once more into its parent)."""
    m = into if into is not None else common_pb2.LandmarkSeries()
    m.pass_name, m.num_points = name, s.num_points
    m.frame_index.extend(s.frame_index.tolist())
    set_array(m, "points", s.points)
    return m


FACEMESH_POINTS = (468, 478)  # what FaceMesh gives: plain and refined (backends.landmarks.backend)
# Normalised coordinates: a face a thousand frame widths away is no face, and the fits and crops
# stay finite (1e30 overflows them).
MAX_COORDINATE = 1e3


def points_from_proto(message, name: str, num_points: int, rows: int | None = None) -> np.ndarray:
    """message.<name> as (T, num_points, 3) landmarks, checked as they come off the wire: ValueError
    with a one-line reason for anything FaceMesh cannot have produced (the caller's INVALID_ARGUMENT;
    unchecked, it reached the fits as an INTERNAL error). rows: the frames it must hold."""
    if num_points not in FACEMESH_POINTS:
        raise ValueError(f"num_points is {num_points}: FaceMesh gives {' or '.join(map(str, FACEMESH_POINTS))}")
    flat = get_array(message, name)
    row = num_points * 3
    if len(flat) % row or (rows is not None and len(flat) != rows * row):
        frames = f"{rows} frames of " if rows is not None else ""
        raise ValueError(f"{len(flat)} floats for {frames}{num_points} points (need frames x points x 3)")
    points = flat.reshape(-1, num_points, 3)
    _check_rows(points)
    return points


def _check_rows(points: np.ndarray):
    """Every row is a face (finite coordinates within MAX_COORDINATE) or all NaN (no face)."""
    usable = np.abs(points) <= MAX_COORDINATE  # False for NaN and inf
    bad = ~usable.all(axis=(1, 2)) & ~np.isnan(points).all(axis=(1, 2))
    if bad.any():
        t = int(np.argmax(bad))
        value = points[t][~usable[t]][0]
        what = "NaN beside coordinates (a row is a face or all NaN)" if np.isnan(value) else \
            f"{value:g} is not a normalised coordinate (finite, within {MAX_COORDINATE:g})"
        raise ValueError(f"frame row {t}: {what}")


def landmarks_from_proto(m: common_pb2.LandmarkSeries) -> LandmarkSeries:
    try:
        points = points_from_proto(m, "points", m.num_points, rows=len(m.frame_index))
    except ValueError as err:
        raise ValueError(f"landmark series {m.pass_name!r}: {err}") from None
    series = LandmarkSeries.from_arrays(np.asarray(m.frame_index, dtype=np.int64), points)
    series.num_points = m.num_points
    return series


def landmark_passes_from_proto(messages) -> dict[str, LandmarkSeries]:
    """{pass name: series} of the passes of one video: each checked, all over the same frames."""
    out = {}
    for m in messages:
        if m.pass_name in out:
            raise ValueError(f"landmark series {m.pass_name!r} given twice")
        out[m.pass_name] = landmarks_from_proto(m)
    frames = {name: s.frame_index for name, s in out.items()}
    first = next(iter(frames), None)
    for name, index in frames.items():
        if not np.array_equal(index, frames[first]):
            raise ValueError(f"landmark series {name!r} ({len(index)} frames) does not cover the frames of "
                             f"{first!r} ({len(frames[first])}): the passes of one video cover the same frames")
    return out


def pose_to_proto(p: HeadPose, message):
    for name in ("pitch", "yaw", "roll", "cx", "cy"):
        set_array(message, name, getattr(p, name))
    return message


def pose_from_proto(m) -> HeadPose:
    return HeadPose(*(get_array(m, n) for n in ("pitch", "yaw", "roll", "cx", "cy")))


def audio_to_proto(a: AudioSeries, has_audio: bool, message):
    message.has_audio = has_audio
    message.has_samples = a.rms is not None
    message.problem = a.problem or ""
    if a.rms is not None:
        set_array(message, "rms", a.rms)
        set_array(message, "rms_times", a.rms_times)
        message.speech_start.extend([s for s, _ in a.speech])
        message.speech_end.extend([e for _, e in a.speech])
        message.silence_speech_start.extend([s for s, _ in a.silence_speech])
        message.silence_speech_end.extend([e for _, e in a.silence_speech])
        message.extraction = a.extraction
    return message


def audio_from_proto(m) -> AudioSeries:
    if not m.has_samples:
        return AudioSeries(problem=m.problem or None)
    return AudioSeries(get_array(m, "rms"), get_array(m, "rms_times"),
                       [(float(s), float(e)) for s, e in zip(m.speech_start, m.speech_end)],
                       [(float(s), float(e)) for s, e in zip(m.silence_speech_start, m.silence_speech_end)],
                       m.extraction)


# ------------------------------------------------------------------ results
def result_to_proto(r: VideoResult) -> evaluator_pb2.VideoResult:
    return evaluator_pb2.VideoResult(
        model=r.model, video=r.video, status=r.status, reason=r.reason or "", metrics=r.metrics,
        nan_reasons=r.nan_reasons, counts=r.counts, frames_total=r.frames_total,
        frames_used=r.frames_used, face_frames=r.face_frames, fps=r.fps, width=r.width, height=r.height,
        seconds=r.seconds, warnings=r.warnings, settings_json=json.dumps(r.settings),
        provenance_json=json.dumps(r.provenance), timings=r.timings, av_offset=r.av_offset,
        trace={k: evaluator_pb2.Series(values=v) for k, v in r.trace.items()},
        drift_json=json.dumps(json_safe(r.drift), allow_nan=False) if r.drift else "")


def result_from_proto(m: evaluator_pb2.VideoResult) -> VideoResult:
    return VideoResult(
        model=m.model, video=m.video, status=m.status, reason=m.reason or None,
        metrics=in_metric_order(dict(m.metrics)), nan_reasons=in_metric_order(dict(m.nan_reasons)),
        counts=in_metric_order(dict(m.counts)), frames_total=m.frames_total, frames_used=m.frames_used,
        face_frames=m.face_frames, fps=m.fps, width=m.width, height=m.height, seconds=m.seconds,
        warnings=list(m.warnings), settings=json.loads(m.settings_json or "{}"),
        provenance=json.loads(m.provenance_json or "{}"), timings=dict(m.timings), av_offset=dict(m.av_offset),
        trace={k: list(v.values) for k, v in m.trace.items()}, drift=json.loads(m.drift_json or "{}"))


def failed_result(err) -> VideoResult | None:
    """The failed VideoResult an Evaluate refusal carries in its trailer (the video's own fault),
    or None when the call failed for another reason (the request, the mesh)."""
    trailer = dict(err.trailing_metadata() or ()).get(RESULT_TRAILER)
    return None if trailer is None else result_from_proto(evaluator_pb2.VideoResult.FromString(trailer))


# ------------------------------------------------------------------ leaderboards
def _interval(pair) -> evaluator_pb2.Interval:
    return evaluator_pb2.Interval(low=pair[0], high=pair[1])


def leaderboard_to_proto(board: Leaderboard) -> evaluator_pb2.Leaderboard:
    """A leaderboard with its bootstrap intervals (pure.scoring.uncertainty), as GetLeaderboard answers."""
    b = board.uncertainty
    out = evaluator_pb2.Leaderboard(reference=board.gt_name, weights=board.weights, warnings=board.warnings)
    if b is not None:
        out.intervals.CopyFrom(evaluator_pb2.Intervals(
            resamples=b.resamples, seed=b.seed, level=b.level, gt_resampled=b.gt_resampled,
            not_apart=[c.note(b.level) for c in b.comparisons if not c.apart]))
    for r in board.rows:
        row = out.rows.add(model=r.model, scores=r.scores, groups=r.groups, final_score=r.final, rank=r.rank or 0,
                           counts=r.counts or {}, is_gt=r.is_gt, note=r.note)
        ci = b.rows.get(r.model) if b is not None else None
        if ci is not None and ci.final is not None:
            for name, pair in ci.normalised.items():
                row.scores_ci[name].CopyFrom(_interval(pair))
            for name, pair in ci.groups.items():
                row.groups_ci[name].CopyFrom(_interval(pair))
            row.final_ci.CopyFrom(_interval(ci.final))
    return out
