"""The pass over a video's frames: decode once, every FaceMesh pass and the quality models on
each decoded frame, side by side in threads. The mesh's quality and head-pose services run their
own passes (run_quality_pass, run_headpose_pass) with the same batching.

Collects every per-frame series the metrics need; frames are not kept beyond one quality batch.
"""
import queue
import threading
from dataclasses import dataclass, field

import numpy as np

from theval_mesh.backends.headpose.facexformer import PoseBatches
from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.backends.liveness import check
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.metrics import quality as q
from theval_mesh.pure.metrics.profiles import PAPER, REFERENCE
from theval_mesh.pure.settings import RunSettings


@dataclass
class FrameSeries:
    """Everything one pass over the frames produced, for one video."""
    width: int
    height: int
    fps: float
    frame_count: int = 0    # frames decoded
    header_frames: int = 0  # frames the header announces (backends.media.decode.VideoInfo)
    landmarks: dict[str, LandmarkSeries] = field(default_factory=dict)  # pass name -> series
    # Per-frame scores of each quality metric, named by its registry key (read by key).
    global_aesthetic: list[float] = field(default_factory=list)
    face_quality: list[float] = field(default_factory=list)
    mouth_quality: list[float] = field(default_factory=list)
    # FaceXFormer head pose (backends.headpose.facexformer), one row per used frame: pitch, yaw,
    # roll (degrees), cx, cy (pixels), NaN where no face; None when the rigid fit estimates it.
    head_pose: np.ndarray | None = None


QUEUE_FRAMES = 8  # frames a stage may run ahead of the slowest one (bounds memory)


class _QualityBatches:
    """Buffers frames and crops so the quality models see the reference's batches of 64 (the
    proxy, whose scores do not depend on the batch, takes full frames one at a time)."""

    def __init__(self, backend, profile: str, out: FrameSeries):
        self.backend, self.profile, self.out = backend, profile, out
        self.frames, self.mouths, self.faces = [], [], []
        self.frame_batch = backend.frame_batch()

    def add(self, frame: np.ndarray, mouth_points, face_points):
        w, h = self.out.width, self.out.height
        self.frames.append(self.backend.kept_frame(frame))
        # A box wholly outside the frame (landmarks sent to the quality service as they like) crops
        # nothing: no mouth or face in that frame, as when FaceMesh finds none.
        if mouth_points is not None and (mouth := q.crop(frame, q.mouth_box(mouth_points, w, h))).size:
            self.mouths.append(mouth.copy())
        if self.profile == PAPER and face_points is not None and \
                (face := q.crop(frame, q.face_box(face_points, w, h))).size:
            self.faces.append(face.copy())
        self.flush(final=False)

    def flush(self, final: bool):
        if self.frames and (final or len(self.frames) >= self.frame_batch or
                            len(self.frames) * self.frames[0].size // 3 >= q.FRAME_BATCH_PIXELS):
            if self.profile == REFERENCE:  # the reference scores face quality on FULL frames
                aesthetic, face = self.backend.full_frames(self.frames)
                self.out.face_quality.extend(face)
            else:
                aesthetic = self.backend.global_aesthetic(self.frames)
            self.out.global_aesthetic.extend(aesthetic)
            self.frames = []
        if self.faces and (final or len(self.faces) >= self.frame_batch):
            self.out.face_quality.extend(self.backend.face_quality(self.faces))
            self.faces = []
        if self.mouths and (final or len(self.mouths) >= q.MOUTH_BATCH):
            self.out.mouth_quality.extend(self.backend.mouth_quality(self.mouths))
            self.mouths = []


def mesh_passes(settings: RunSettings) -> dict[str, passes.MeshPass]:
    """Which FaceMesh passes run over every used frame (the silent-lip pass is separate)."""
    if settings.single_pass:
        return {"single": passes.SINGLE}
    lip_sync = passes.LIP_SYNC_REFERENCE if settings.profile == REFERENCE else passes.LIP_SYNC_PAPER
    return {p.name: p for p in (passes.SINGLE, passes.LIP_DYNAMICS, lip_sync, passes.MOUTH_QUALITY)}


class _Worker(threading.Thread):
    """One stage of the frame pipeline in its own thread: takes (index, frame) items in order from
    a bounded queue. MediaPipe, PyAV and numpy release the GIL, so the stages use both cores."""

    def __init__(self, name: str, step, out: queue.Queue | None = None):
        super().__init__(name=f"theval-{name}", daemon=True)
        self.step, self.out = step, out
        self.inbox: queue.Queue = queue.Queue(maxsize=QUEUE_FRAMES)
        self.error: BaseException | None = None

    def run(self):
        try:
            while (item := self.inbox.get()) is not None:
                result = self.step(*item)
                if self.out is not None:
                    self.out.put(result)
        except BaseException as err:  # noqa: BLE001 - surfaced by the decoding thread (_Pipeline.put / close)
            self.error = err
            while self.inbox.get() is not None:  # drain, so the decoder never blocks on us
                pass
        finally:
            if self.out is not None:
                self.out.put(None)


class _Pipeline:
    """The decoding thread's view of the workers: every item goes to the workers that want it."""

    def __init__(self, workers: dict[str, _Worker]):
        self.workers = workers
        for w in workers.values():
            w.start()

    def put(self, item, names):
        for name in names:
            self.workers[name].inbox.put(item)
        self.check()

    def check(self):
        for w in self.workers.values():
            if w.error is not None:
                raise w.error

    def close(self):
        for w in self.workers.values():
            w.inbox.put(None)
        for w in self.workers.values():
            w.join()


def _tracking_step(tracker, series: LandmarkSeries):
    def step(index, frame):
        points = tracker.process(frame)
        series.append(index, points)
        return points
    return step


def used_frames(reader: MediaReader, settings: RunSettings, on_frames=None, cancelled=None):
    """(index, frame) of every frame the metrics use (each settings.frame_stride-th), decoded in
    order; on_frames(1) counts every decoded frame; cancelled is checked per frame."""
    for index, frame in reader.frames():
        check(cancelled)
        if on_frames:
            on_frames(1)
        if index % settings.frame_stride == 0:
            yield index, frame


def run_frame_pass(reader: MediaReader, settings: RunSettings, quality_backend,
                   silent_frames=None, on_frames=None, cancelled=None,
                   headpose_backend=None) -> FrameSeries:
    """Decode the video once and feed every used frame to FaceMesh and the quality models.

    Each FaceMesh pass runs in its own thread on every used frame, in order (so each tracker sees
    exactly what it would see alone, and the numbers do not depend on the threads); the quality
    models run in another thread, on each frame and the landmarks its crops need.

    silent_frames: frame indices for the reference silent-lip pass (None: no such pass).
    on_frames(n): progress callback, called with the number of frames just decoded.
    cancelled: backends.liveness; checked per frame (None: never cancelled).
    headpose_backend: FaceXFormer head pose (backends.headpose.facexformer), in its own thread on
    every used frame; None: the rigid fit estimates head pose from the landmarks afterwards.
    """
    info = reader.info
    out = FrameSeries(info.width, info.height, info.fps, header_frames=info.header_frames)
    specs = dict(mesh_passes(settings))
    if silent_frames is not None:
        specs["silent_lip"] = passes.SILENT_LIP
        silent = set(int(i) for i in silent_frames)
    # MediaPipe is imported when a pass needs it: the quality, audio and evaluator processes never do.
    from theval_mesh.backends.landmarks.backend import FaceTracker
    trackers = {name: FaceTracker(p) for name, p in specs.items()}
    out.landmarks = {name: LandmarkSeries(t.num_points) for name, t in trackers.items()}
    # The quality thread needs each frame's mouth (and, in paper, face) landmarks, in order.
    mouth_pass = passes.MOUTH_QUALITY.name if passes.MOUTH_QUALITY.name in specs else "single"
    wanted = {mouth_pass, "single"} if quality_backend else set()
    handoff = {name: queue.Queue(maxsize=QUEUE_FRAMES) for name in wanted}
    workers = {name: _Worker(name, _tracking_step(t, out.landmarks[name]), handoff.get(name))
               for name, t in trackers.items()}
    if quality_backend:
        batches = _QualityBatches(quality_backend, settings.profile, out)

        def quality_step(index, frame):
            single = handoff["single"].get()
            mouth = single if mouth_pass == "single" else handoff[mouth_pass].get()
            batches.add(frame, mouth, single)
        workers["quality"] = _Worker("quality", quality_step)
    if headpose_backend:
        poses = PoseBatches(headpose_backend, cancelled)
        workers["headpose"] = _Worker("headpose", poses.add)
    every = [n for n in workers if n != "silent_lip"]
    pipeline = _Pipeline(workers)
    try:
        for index, frame in used_frames(reader, settings, on_frames, cancelled):
            pipeline.put((index, frame), every + (["silent_lip"] if silent_frames is not None
                                                  and index in silent else []))
    finally:
        pipeline.close()
        for t in trackers.values():
            t.close()
    pipeline.check()
    if quality_backend:
        batches.flush(final=True)
    if headpose_backend:
        poses.flush(final=True)
        out.head_pose = poses.series()
    out.frame_count = reader.frame_count
    return out


def run_quality_pass(reader: MediaReader, settings: RunSettings, quality_backend,
                     landmarks: dict[str, LandmarkSeries], on_frames=None, cancelled=None) -> FrameSeries:
    """Quality scores for a video whose landmarks were computed elsewhere (the mesh's quality
    service): decode, and crop with the given points of the same frames. on_frames and
    cancelled as in run_frame_pass."""
    info = reader.info
    out = FrameSeries(info.width, info.height, info.fps, header_frames=info.header_frames, landmarks=landmarks)
    single = landmarks["single"]
    mouth = landmarks.get(passes.MOUTH_QUALITY.name, single)
    rows = {int(i): k for k, i in enumerate(single.frame_index)}
    mouth_rows = {int(i): k for k, i in enumerate(mouth.frame_index)}
    single_pts, mouth_pts = single.points, mouth.points
    batches = _QualityBatches(quality_backend, settings.profile, out)

    def points(table, pts, index):
        k = table.get(index)
        return None if k is None or np.isnan(pts[k, 0, 0]) else pts[k]
    for index, frame in used_frames(reader, settings, on_frames, cancelled):
        batches.add(frame, points(mouth_rows, mouth_pts, index), points(rows, single_pts, index))
    batches.flush(final=True)
    out.frame_count = reader.frame_count
    return out


def run_headpose_pass(reader: MediaReader, settings: RunSettings, headpose_backend, on_frames=None,
                      cancelled=None) -> FrameSeries:
    """FaceXFormer head pose alone (the mesh's head-pose service): the rows run_frame_pass gathers
    in its head-pose thread, one per used frame, from the same batches. on_frames and cancelled
    as in run_frame_pass (cancelled is also checked per network batch)."""
    info = reader.info
    out = FrameSeries(info.width, info.height, info.fps, header_frames=info.header_frames)
    poses = PoseBatches(headpose_backend, cancelled)
    for index, frame in used_frames(reader, settings, on_frames, cancelled):
        poses.add(index, frame)
    poses.flush(final=True)
    out.head_pose = poses.series()
    out.frame_count = reader.frame_count
    return out
