"""The stages of one video run by the mesh's services over gRPC (the evaluator's side).

Same composition as the embedded engine (stages.score); only where the work runs differs:
audio and landmarks run at once, then head pose beside quality. With FaceXFormer (the head-pose
service decodes the video itself), head pose starts beside the landmarks too. Each call gets a deadline
within the caller's own and a few retries when its service is UNAVAILABLE, retries while the
service refuses it as busy, and is cancelled as soon as the evaluator's own caller is gone.
"""
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np

from theval_mesh.backends.headpose import facexformer
from theval_mesh.backends.landmarks import passes
from theval_mesh.backends.liveness import check, or_event
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.frame_pass import FrameSeries
from theval_mesh.core.provenance import describe
from theval_mesh.core.stages import facexformer_pose
from theval_mesh.pure.errors import ServiceError, VideoError
from theval_mesh.pure.metrics.registry import QUALITY, in_group
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.admission import is_busy
from theval_mesh.rpc.memory_budget import MemoryBudget, default_budget, video_bytes
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.server import channel_options
from theval_mesh.rpc.status import error_from_rpc
from theval_mesh.rpc.v1 import (
    audio_pb2,
    audio_pb2_grpc,
    common_pb2,
    headpose_pb2,
    headpose_pb2_grpc,
    landmarks_pb2,
    landmarks_pb2_grpc,
    quality_pb2,
    quality_pb2_grpc,
)

STUBS = {"landmarks": landmarks_pb2_grpc.LandmarksServiceStub, "headpose": headpose_pb2_grpc.HeadPoseServiceStub,
         "quality": quality_pb2_grpc.QualityServiceStub, "audio": audio_pb2_grpc.AudioServiceStub}
FIRST_RETRY_S, LAST_RETRY_S = 0.1, 1.0
POLL_S = 0.2  # how soon a call whose caller went away is cancelled


class MeshClients:
    """Channels to the four services, shared by every call of the evaluator."""

    def __init__(self, addresses: dict, call_timeout_s: float = 600.0, retries: int = 3,
                 max_message_bytes: int = 1 << 30, threads: int = 32, security: ClientSecurity | None = None,
                 memory: MemoryBudget | None = None):
        self.addresses, self.call_timeout_s, self.retries = dict(addresses), call_timeout_s, retries
        self.memory = memory or MemoryBudget(default_budget())
        self.channels = {name: client_channel(address, security, channel_options(max_message_bytes))
                         for name, address in self.addresses.items()}
        self.stubs = {name: STUBS[name](channel) for name, channel in self.channels.items()}
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fan-out")
        self._provenance: dict = {}
        self._lock = threading.Lock()

    def call(self, service: str, method: str, request, deadline: float, video: str = "", cancelled=None):
        """stub.method(request) within `deadline` (time.monotonic()), retried on UNAVAILABLE and,
        until the deadline, while the service is busy; cancelled (backends.liveness) ends it."""
        delay = FIRST_RETRY_S
        attempt = 0
        while True:
            check(cancelled)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServiceError("DEADLINE_EXCEEDED", f"the deadline passed before the {service} call")
            try:
                call = getattr(self.stubs[service], method).future(request, timeout=min(self.call_timeout_s, left))
                return _answer(call, cancelled)
            except grpc.RpcError as err:
                busy = is_busy(err)  # all its workers in use: it will have one free soon
                if ((busy or (err.code() == grpc.StatusCode.UNAVAILABLE and attempt < self.retries))
                        and deadline - time.monotonic() > delay):
                    if not busy:
                        attempt += 1
                    time.sleep(delay)
                    delay = min(2 * delay, LAST_RETRY_S)
                    continue
                raise error_from_rpc(err, service, self.addresses[service], video) from None

    def provenance(self, settings: RunSettings, deadline: float) -> dict:
        """describe() from the services' own descriptions of their backends (cached)."""
        key = json.dumps(settings.key(), sort_keys=True)
        with self._lock:
            if key in self._provenance:
                return self._provenance[key]
        request = common_pb2.DescribeRequest(settings=wire.settings_to_proto(settings))
        answers = {name: self.call(name, "Describe", request, deadline) for name in STUBS}
        audio = json.loads(answers["audio"].provenance_json or "{}")
        headpose = json.loads(answers["headpose"].provenance_json or "{}")
        provenance = describe(settings, answers["landmarks"].backend, answers["headpose"].backend,
                              answers["audio"].backend, json.loads(answers["quality"].provenance_json),
                              audio.get("served_by", "in-process"), headpose.get("served_by", "in-process"),
                              headpose.get("inference"))
        with self._lock:
            self._provenance[key] = provenance
        return provenance

    def forget_provenance(self):
        """A service went down: what comes back may have other models or weights."""
        with self._lock:
            self._provenance.clear()

    def open(self, video_ref, path: str, settings: RunSettings, deadline: float, cancelled=None) -> "MeshVideo":
        return MeshVideo(self, video_ref, path, settings, deadline, cancelled)

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        for channel in self.channels.values():
            channel.close()


def _answer(call, cancelled):
    """The answer of a call in flight; the call is cancelled once `cancelled` says so."""
    if cancelled is None:
        return call.result()
    while True:
        try:
            return call.result(timeout=POLL_S)
        except grpc.FutureTimeoutError:
            if cancelled():
                call.cancel()
                check(cancelled)


class MeshVideo:
    """stages.VideoStages for one video, over gRPC. The video is opened here too (no decoding)
    so that a bad file fails before any service is called."""

    def __init__(self, clients: MeshClients, video_ref, path: str, settings: RunSettings, deadline: float,
                 cancelled=None):
        self.clients, self.ref, self.path, self.deadline = clients, video_ref, path, deadline
        self.closed = threading.Event()  # ends a head-pose call still running for a failed video
        self.cancelled = cancelled
        self.settings = settings
        self.settings_msg = wire.settings_to_proto(settings)
        reader = MediaReader(path, settings.limits)
        reader.close()
        self.info = reader.info
        # Before any service is called: what this video takes of the evaluator's memory.
        self.reservation = clients.memory.reserve(video_bytes(self.info, settings), path, deadline, cancelled)
        self._series: dict = {}  # pass name -> LandmarkSeries message, reused for the quality call
        self._pose = None  # the EstimateVideo call in flight (FaceXFormer)

    def close(self):
        self.closed.set()
        self._series = {}
        self.reservation.release()

    def _call(self, service, method, request, cancelled=None):
        return self.clients.call(service, method, request, self.deadline, self.path, cancelled or self.cancelled)

    def _facexformer(self) -> bool:
        """Whether the head-pose service estimates with FaceXFormer for these settings (as its
        Describe said: `auto` follows what it serves; `facexformer` of a rigid-fit service has
        already failed there, FAILED_PRECONDITION)."""
        provenance = self.clients.provenance(self.settings, self.deadline)
        return str(provenance["headpose"]).startswith(facexformer.NAME)

    def _start_head_pose(self):
        """EstimateVideo in the pool: the head-pose service decodes the video itself, so it runs
        beside the landmark pass; ended once this video is closed (e.g. it failed meanwhile)."""
        request = headpose_pb2.HeadPoseVideoRequest(video=self.ref, settings=self.settings_msg)
        cancelled = or_event(self.cancelled or (lambda: None), self.closed)
        self._pose = self.clients.pool.submit(self._call, "headpose", "EstimateVideo", request, cancelled)

    def audio(self):
        request = audio_pb2.AudioRequest(video=self.ref, profile=self.settings.profile)
        return self.clients.pool.submit(lambda: wire.audio_from_proto(self._call("audio", "Analyse", request)))

    def landmarks(self, silent, on_frames=None) -> FrameSeries:
        if self._facexformer():
            self._start_head_pose()
        request = landmarks_pb2.TrackRequest(video=self.ref, settings=self.settings_msg,
                                             silent_lip_pass=silent is not None,
                                             silent_frames=[] if silent is None else [int(i) for i in silent])
        response = self._call("landmarks", "Track", request)
        self._series = {m.pass_name: m for m in response.series}
        info = response.info
        if on_frames:
            on_frames(response.frame_count)
        return FrameSeries(info.width, info.height, info.fps, frame_count=response.frame_count,
                           header_frames=self.info.header_frames,
                           landmarks={m.pass_name: wire.landmarks_from_proto(m) for m in response.series})

    def quality(self, series: FrameSeries):
        used = [self._series[n] for n in ("single", passes.MOUTH_QUALITY.name) if n in self._series]
        request = quality_pb2.QualityRequest(video=self.ref, settings=self.settings_msg, landmarks=used)

        def run():
            response = self._call("quality", "Score", request)
            for metric in in_group(QUALITY):
                setattr(series, metric.key, list(wire.get_array(response, metric.key)))
            return series
        return self.clients.pool.submit(run)

    def head_pose(self, series, width, height):
        if self._pose is not None:
            return self._facexformer_pose(series, self._pose.result())
        points = series.landmarks["single"].points  # the rigid fit of the single pass's landmarks
        request = headpose_pb2.HeadPoseRequest(width=width, height=height, num_points=points.shape[1])
        wire.set_array(request, "points", points)
        return wire.pose_from_proto(self._call("headpose", "Estimate", request))

    def _facexformer_pose(self, series: FrameSeries, response):
        """The embedded rule (stages.facexformer_pose) on the service's rows, which must be the
        landmark pass's frames: both services decode the same file with the same decoder."""
        rows = np.stack([wire.get_array(response, n) for n in ("pitch", "yaw", "roll", "cx", "cy")], axis=1)
        used = len(series.landmarks["single"].frame_index)
        if response.frame_count != series.frame_count or len(rows) != used:
            raise VideoError(self.path, f"the head-pose service decoded {response.frame_count} frames ({len(rows)} "
                             f"used), the landmarks service {series.frame_count} ({used} used)")
        series.head_pose = rows
        return facexformer_pose(series, self.settings.profile)
