"""Score one video on the in-process backends: decode once, one FaceMesh pass, VAD once."""
import time
import traceback

import av
import numpy as np

from ..audio.backend import AudioBackend
from ..common.errors import VideoError
from ..headpose.backend import BACKEND as HEADPOSE_BACKEND
from ..headpose.backend import estimate as estimate_head_pose
from ..landmarks.backend import BACKEND as LANDMARK_BACKEND
from ..media.decode import DECODER, MediaReader
from ..metrics.speech_frames import silent_frames
from ..quality.backend import QualityBackend
from ..version import VERSION
from ..audio.series import AudioSeries
from .compute import compute_metrics
from .frame_pass import mesh_passes, run_frame_pass
from .results import FAILED, OK, VideoResult
from .settings import RunSettings


class Engine:
    """Loads the models once; then score_video() for each video."""

    def __init__(self, settings: RunSettings, quality_store=None):
        self.settings = settings
        self.audio = AudioBackend()
        self.quality = QualityBackend(mode=settings.quality, profile=settings.profile, store=quality_store)
        self._provenance = None

    def provenance(self) -> dict:
        if self._provenance is None:
            self._provenance = self._describe()
        return self._provenance

    def _describe(self) -> dict:
        s = self.settings
        lip_sync_input = "BGR frames (reference quirk)" if (s.exact_reference and s.profile == "reference") \
            else "RGB frames"
        quality = self.quality.provenance()
        return {
            "tool": f"theval-mesh {VERSION}",
            "profile": s.profile,
            # The passes change the values, so they are part of what GT and models must share.
            "landmarks": {"backend": LANDMARK_BACKEND,
                          "passes": sorted(mesh_passes(s)) + (["silent_lip"] if s.exact_reference else []),
                          "lip_sync_input": lip_sync_input},
            "headpose": HEADPOSE_BACKEND,
            "vad": self.audio.provenance(),
            "quality": quality["quality"],  # metric -> model and weights checksum, or proxy:<name>
            "quality_mode": quality["mode"],
            "quality_weights": quality.get("weights") or quality.get("proxy_definition"),
            "decoder": DECODER,
            "frames": "all" if s.frame_stride == 1 else f"every {s.frame_stride}th",
        }

    def score_video(self, path, model: str = "", on_frames=None) -> VideoResult:
        start = time.perf_counter()
        result = VideoResult(model=model, video=str(path), status=OK,
                             settings=self.settings.key(), provenance=self.provenance())
        try:
            self._score(path, result, on_frames)
        except VideoError as err:
            result.status, result.reason = FAILED, err.reason
        except (av.error.FFmpegError, MemoryError, ValueError, RuntimeError) as err:
            # Unexpected, but one video must never take the batch down: record and go on.
            result.status = FAILED
            result.reason = f"internal error: {type(err).__name__}: {err}"
            result.warnings.append(traceback.format_exc(limit=3))
        result.seconds = round(time.perf_counter() - start, 3)
        return result

    def _score(self, path, result: VideoResult, on_frames):
        s = self.settings
        reader = MediaReader(path, s.limits)
        info = reader.info
        result.fps, result.width, result.height = info.fps, info.width, info.height
        silent = None
        if s.exact_reference and info.has_audio:
            # The reference's silent-lip pass tracks only silent frames, which must be known
            # before the frame pass: read the audio first (the exact mode decodes twice).
            audio = _read_audio_only(path, s)
            if audio is not None:
                speech = self.audio.speech_segments(audio.at_vad_rate())
                silent = silent_frames(speech, info.fps, _frame_estimate(info))
        series = run_frame_pass(reader, s, self.quality, silent_frames=silent, on_frames=on_frames)
        single = series.landmarks["single"]
        result.frames_total, result.frames_used = series.frame_count, len(single.frame_index)
        result.face_frames = int(single.face_found().sum())
        if result.face_frames == 0:
            raise VideoError(path, f"no face found in any of the {result.frames_used} frames used")
        audio_series = AudioSeries()
        if reader.audio is not None and len(reader.audio.samples):
            audio_series = self.audio.analyse(reader.audio)
        elif info.has_audio:
            result.warnings.append("audio track is empty")
        else:
            result.warnings.append("no audio track: synchronisation metrics are NaN")
        pose = estimate_head_pose(single.points, info.width, info.height)
        values = compute_metrics(series, pose, audio_series, s)
        result.metrics, result.nan_reasons, result.counts = values.values, values.nan_reasons, values.counts


def _frame_estimate(info) -> int:
    return int(round(info.duration_s * info.fps))


def _read_audio_only(path, settings):
    reader = MediaReader(path, settings.limits)
    return reader.read_audio()
