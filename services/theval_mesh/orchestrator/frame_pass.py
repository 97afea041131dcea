"""The single pass over a video's frames: decode once, FaceMesh once per frame, quality batched.

Collects every per-frame series the metrics need; frames are not kept beyond one quality batch.
"""
from dataclasses import dataclass, field

import numpy as np

from ..landmarks import passes
from ..landmarks.backend import FaceTracker, LandmarkSeries
from ..media.decode import MediaReader
from ..metrics import quality as q
from ..metrics.profiles import PAPER, REFERENCE
from .settings import RunSettings


@dataclass
class FrameSeries:
    """Everything one pass over the frames produced, for one video."""
    width: int
    height: int
    fps: float
    frame_count: int = 0
    landmarks: dict[str, LandmarkSeries] = field(default_factory=dict)  # pass name -> series
    global_aesthetic: list[float] = field(default_factory=list)
    face_quality: list[float] = field(default_factory=list)
    mouth_quality: list[float] = field(default_factory=list)


class _QualityBatches:
    """Buffers frames and crops so the quality models see the reference's batches of 64."""

    def __init__(self, backend, profile: str, out: FrameSeries):
        self.backend, self.profile, self.out = backend, profile, out
        self.frames, self.mouths, self.faces = [], [], []

    def add(self, frame: np.ndarray, mouth_points, face_points):
        w, h = self.out.width, self.out.height
        self.frames.append(frame)
        if mouth_points is not None:
            self.mouths.append(q.crop(frame, q.mouth_box(mouth_points, w, h)).copy())
        if self.profile == PAPER and face_points is not None:
            self.faces.append(q.crop(frame, q.face_box(face_points, w, h)).copy())
        self.flush(final=False)

    def flush(self, final: bool):
        full = q.MOUTH_BATCH
        if self.frames and (final or len(self.frames) >= full):
            self.out.global_aesthetic.extend(self.backend.global_aesthetic(self.frames))
            if self.profile == REFERENCE:  # the reference scores face quality on FULL frames
                self.out.face_quality.extend(self.backend.face_quality(self.frames))
            self.frames = []
        if self.faces and (final or len(self.faces) >= full):
            self.out.face_quality.extend(self.backend.face_quality(self.faces))
            self.faces = []
        if self.mouths and (final or len(self.mouths) >= full):
            self.out.mouth_quality.extend(self.backend.mouth_quality(self.mouths))
            self.mouths = []


def mesh_passes(settings: RunSettings) -> dict[str, passes.MeshPass]:
    """Which FaceMesh passes run over every used frame (the silent-lip pass is separate)."""
    if not settings.exact_reference:
        return {"single": passes.SINGLE}
    lip_sync = passes.LIP_SYNC_REFERENCE if settings.profile == REFERENCE else passes.LIP_SYNC_PAPER
    return {"single": passes.SINGLE, "lip_dynamics": passes.LIP_DYNAMICS,
            "lip_sync": lip_sync, "mouth_quality": passes.MOUTH_QUALITY}


def run_frame_pass(reader: MediaReader, settings: RunSettings, quality_backend,
                   silent_frames=None, on_frames=None) -> FrameSeries:
    """Decode the video once and feed every used frame to FaceMesh and the quality models.

    silent_frames: frame indices for the exact-reference silent-lip pass (None: no such pass).
    on_frames(n): progress callback, called with the number of frames just decoded.
    """
    info = reader.info
    out = FrameSeries(info.width, info.height, info.fps)
    specs = mesh_passes(settings)
    trackers = {name: FaceTracker(p) for name, p in specs.items()}
    if silent_frames is not None:
        trackers["silent_lip"] = FaceTracker(passes.SILENT_LIP)
        silent = set(int(i) for i in silent_frames)
    out.landmarks = {name: LandmarkSeries(t.num_points) for name, t in trackers.items()}
    batches = _QualityBatches(quality_backend, settings.profile, out) if quality_backend else None
    try:
        for index, frame in reader.frames():
            if on_frames:
                on_frames(1)
            if index % settings.frame_stride:
                continue
            found = {}
            for name, tracker in trackers.items():
                if name == "silent_lip" and index not in silent:
                    continue
                found[name] = tracker.process(frame)
                out.landmarks[name].append(index, found[name])
            if batches:
                mouth = found.get("mouth_quality", found["single"])
                batches.add(frame, mouth, found["single"])
        if batches:
            batches.flush(final=True)
    finally:
        for t in trackers.values():
            t.close()
    out.frame_count = reader.frame_count
    return out


def run_quality_pass(reader: MediaReader, settings: RunSettings, quality_backend,
                     landmarks: dict[str, LandmarkSeries]) -> FrameSeries:
    """Quality scores for a video whose landmarks were computed elsewhere (the mesh's quality
    service): decode, and crop with the given points of the same frames."""
    info = reader.info
    out = FrameSeries(info.width, info.height, info.fps, landmarks=landmarks)
    single = landmarks["single"]
    mouth = landmarks.get("mouth_quality", single)
    rows = {int(i): k for k, i in enumerate(single.frame_index)}
    mouth_rows = {int(i): k for k, i in enumerate(mouth.frame_index)}
    single_pts, mouth_pts = single.points, mouth.points
    batches = _QualityBatches(quality_backend, settings.profile, out)

    def points(table, pts, index):
        k = table.get(index)
        return None if k is None or np.isnan(pts[k, 0, 0]) else pts[k]
    for index, frame in reader.frames():
        if index % settings.frame_stride:
            continue
        batches.add(frame, points(mouth_rows, mouth_pts, index), points(rows, single_pts, index))
    batches.flush(final=True)
    out.frame_count = reader.frame_count
    return out
