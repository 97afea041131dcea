"""Client: a generation pipeline's handle on a running mesh's evaluator (theval.v1.EvaluatorService):
score a video (a path the server reads, or the file's bytes), GT reference sets, bulk jobs.

Errors are the project's exceptions with the server's detail (api.errors); a video that cannot be
scored is not an error but a result with status "failed" and its reason, as everywhere else.
"""
import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from theval_mesh.api.arguments import Models, model_pairs, run_settings
from theval_mesh.api.errors import error_from_rpc
from theval_mesh.api.evaluation import LeaderboardRow
from theval_mesh.backends.media.sources import BYTES_LABEL
from theval_mesh.core.results import VideoResult
from theval_mesh.pure.errors import ServiceError, UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc

Video = str | Path | bytes
STOPPED = ("done", "failed", "cancelled", "interrupted")  # StreamJob ends at these states
MAX_RECEIVE = 64 << 20


@dataclass(frozen=True)
class Scores:
    """A video's scores against a GT reference set: metric names as in docs/metrics.md."""
    reference: str
    normalised: dict[str, float]  # 1 - |raw - GT| / |GT|
    groups: dict[str, float]      # Quality, Naturalness, Synchronization
    final: float                  # the Final score (NaN when a metric is: see note)
    note: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class ScoredResult(VideoResult):
    """A VideoResult, with its scores when the call named a reference set."""
    scores: Scores | None = None


@dataclass(frozen=True)
class Reference:
    """A GT reference set as the evaluator stored it."""
    name: str
    videos: int                         # given
    scored: int
    raw: dict[str, float]               # metric name -> mean over the scored videos
    counts: dict[str, int]              # videos behind each mean
    failures: list[tuple[str, str]]     # (video, reason) of those that could not be scored
    owner: str = ""                     # the identity that created it ("" on a server without tokens)


def _reference(m: evaluator_pb2.Reference) -> Reference:
    return Reference(name=m.name, videos=m.videos, scored=m.scored, raw=dict(m.raw), counts=dict(m.counts),
                     failures=[(f.video, f.reason) for f in m.failures], owner=m.owner)


@dataclass(frozen=True)
class JobStatus:
    id: str
    state: str                # queued, running, done, failed, cancelled, interrupted (resumable)
    total: int                # videos
    done: int                 # scored
    failed: int               # bad videos, with their reason in the results
    remaining: int
    rate: float               # videos per second over the last 2 minutes
    eta_s: float | None       # None: unknown
    error: str | None         # why it stopped, when it did not finish
    created: float            # Unix times
    started: float | None
    finished: float | None

    @property
    def stopped(self) -> bool:
        return self.state in STOPPED


def _job(m: evaluator_pb2.Job) -> JobStatus:
    return JobStatus(id=m.id, state=m.state, total=m.total, done=m.done, failed=m.failed, remaining=m.remaining,
                     rate=m.rate, eta_s=None if m.eta_s < 0 else m.eta_s, error=m.error or None,
                     created=m.created_unix, started=m.started_unix or None, finished=m.finished_unix or None)


def _uri(path: str | Path) -> str:
    """A path as the server reads it: absolute (it has no working folder of yours); URIs as given."""
    text = str(path)
    return text if "://" in text else os.path.abspath(text)


def _video_ref(video: Video) -> common_pb2.VideoRef:
    if isinstance(video, bytes):
        return common_pb2.VideoRef(content=video)
    return common_pb2.VideoRef(uri=_uri(video))


class Client:
    """A connection to the evaluator at HOST:PORT (`theval mesh up` prints it).

    token: the bearer token of a server started with --tokens-file; tls_ca: the CA certificate that
    signed its TLS certificate. Unset, both come from THEVAL_TOKEN (or THEVAL_TOKEN_FILE) and
    THEVAL_TLS_CA, and a client certificate from THEVAL_TLS_CLIENT_CERT/KEY. timeout_s bounds each
    call but the streams (an Evaluate of a long video, or a reference set, takes minutes).
    """

    def __init__(self, address: str, token: str | None = None, tls_ca: str | None = None, *,
                 timeout_s: float = 3600.0):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise UserError(f"{address!r}: expected HOST:PORT of the evaluator, e.g. 127.0.0.1:50051")
        env = ClientSecurity.from_env()
        security = dataclasses.replace(env, token=token or env.token, ca=tls_ca or env.ca)
        self.address, self.timeout_s = address, timeout_s
        self.channel = client_channel(address, security, options=[("grpc.max_receive_message_length", MAX_RECEIVE)])
        self._stub = evaluator_pb2_grpc.EvaluatorServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request, video: str | None = None):
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout_s)
        except grpc.RpcError as err:
            raise error_from_rpc(err, self.address, video) from None

    def _stream(self, method: str, request, video: str | None = None, timeout: float | None = None) -> Iterator:
        call = getattr(self._stub, method)(request, timeout=timeout)
        try:
            yield from call
        except grpc.RpcError as err:
            raise error_from_rpc(err, self.address, video) from None
        finally:
            call.cancel()  # the caller stopped early: the server stops too

    # ------------------------------------------------------------------ one video
    def evaluate(self, video: Video, reference: str | None = None, *, model: str = "", name: str | None = None,
                 settings: RunSettings | None = None, **options: Any) -> ScoredResult:
        """Score one video: a path on storage the server reads (under its --allow-root), or the
        file's bytes (up to its --max-video-bytes). With `reference` (a GT reference set), the
        result's `scores` too; with `model` as well, the result is stored for that model's
        leaderboard. Run settings (RunSettings or its fields as keywords) default to the reference
        set's, else the server's."""
        label = name or (BYTES_LABEL if isinstance(video, bytes) else str(video))
        request = evaluator_pb2.EvaluateRequest(video=_video_ref(video), reference=reference or "", model=model,
                                                name=label)
        if settings is not None or options:
            request.settings.CopyFrom(wire.settings_to_proto(run_settings(settings, options)))
        try:
            response = self._stub.Evaluate(request, timeout=self.timeout_s)
        except grpc.RpcError as err:
            failed = wire.failed_result(err)
            if failed is None:  # the request, not the video, was refused (or the mesh failed)
                raise error_from_rpc(err, self.address, label) from None
            return ScoredResult(**vars(failed))
        scores = None
        if response.HasField("scores"):
            s = response.scores
            scores = Scores(reference=s.reference, normalised=dict(s.normalised), groups=dict(s.groups),
                            final=s.final_score, note=s.note, warnings=list(s.warnings))
        return ScoredResult(**vars(wire.result_from_proto(response.result)), scores=scores)

    def create_reference(self, name: str, videos: Iterable[Video], *, replace: bool = False,
                         settings: RunSettings | None = None, on_progress=None, **options: Any) -> Reference:
        """Score a GT set (files or folders the server reads, or bytes) and store it as `name`;
        replace: score again a set of that name (else AlreadyExists). on_progress(done, total,
        video) is called as each GT video is scored (the server streams it)."""
        request = evaluator_pb2.CreateReferenceRequest(name=name, videos=[_video_ref(v) for v in videos],
                                                       replace=replace)
        if settings is not None or options:
            request.settings.CopyFrom(wire.settings_to_proto(run_settings(settings, options)))
        for m in self._stream("CreateReferenceStream", request, f"reference set {name!r}", self.timeout_s):
            if m.HasField("reference"):
                return _reference(m.reference)
            if on_progress is not None:
                on_progress(m.done, m.total, m.video)
        raise ServiceError("UNAVAILABLE", f"the evaluator at {self.address} ended reference set {name!r}'s "
                           "stream without the set")

    def references(self, every_owner: bool = False) -> list[Reference]:
        """Your reference sets (each caller has its own names); every_owner: every owner's, each
        with its owner (an admin's token only: the server's --admins)."""
        m = self._call("ListReferences", evaluator_pb2.ListReferencesRequest(every_owner=every_owner))
        return [_reference(r) for r in m.references]

    def leaderboard(self, reference: str, weights: Mapping[str, float] | str | None = None, *,
                    owner: str | None = None) -> list[LeaderboardRow]:
        """The models scored against your set `reference` (Evaluate with a model), ranked, the GT
        row first, with their bootstrap intervals (the reference set's means held fixed). Raw means
        are not in the protocol: `raw` is empty. owner: another owner's set, for an admin."""
        spec = weights if isinstance(weights, str) or weights is None else \
            ",".join(f"{k}={v}" for k, v in weights.items())
        m = self._call("GetLeaderboard", evaluator_pb2.GetLeaderboardRequest(reference=reference, weights=spec or "",
                                                                              owner=owner))

        def pairs(field) -> dict:
            return {name: (i.low, i.high) for name, i in field.items()}
        return [LeaderboardRow(model=r.model, rank=r.rank or None, final=r.final_score, groups=dict(r.groups),
                               normalised=dict(r.scores), raw={}, counts=dict(r.counts), is_gt=r.is_gt, note=r.note,
                               final_ci=(r.final_ci.low, r.final_ci.high) if r.HasField("final_ci") else None,
                               groups_ci=pairs(r.groups_ci), normalised_ci=pairs(r.scores_ci))
                for r in m.rows]

    # ------------------------------------------------------------------ bulk jobs
    def submit(self, gt: str | Path, models: Models = (), *, gt_name: str = "GT", workers: int | None = None,
               settings: RunSettings | None = None, **options: Any) -> str:
        """Start a job over folders (or videos, or .txt lists) the server reads; returns its id.
        workers: Ray workers (default: the server's --job-workers)."""
        request = evaluator_pb2.SubmitJobRequest(
            gt=_uri(gt), gt_name=gt_name, workers=workers or 0,
            models=[evaluator_pb2.ModelVideos(name=n, path=_uri(p)) for n, p in model_pairs(models)])
        if settings is not None or options:
            request.settings.CopyFrom(wire.settings_to_proto(run_settings(settings, options)))
        return self._call("SubmitJob", request).id

    def status(self, job_id: str) -> JobStatus:
        return _job(self._call("GetJob", evaluator_pb2.JobRequest(id=job_id)))

    def stream(self, job_id: str) -> Iterator[JobStatus]:
        """The job now, then at each change of its counts or state, until it stops."""
        for m in self._stream("StreamJob", evaluator_pb2.JobRequest(id=job_id)):
            yield _job(m)

    def results(self, job_id: str) -> list[VideoResult]:
        """The job's committed results (all of them once it is done), in input order."""
        return [wire.result_from_proto(m) for m in self._stream("GetJobResults", evaluator_pb2.JobRequest(id=job_id))]

    def resume(self, job_id: str) -> JobStatus:
        """Start an interrupted (or failed) job again: its committed results stay, the rest is
        scored. Refused (FAILED_PRECONDITION) while it runs, once done, or after a cancel."""
        return _job(self._call("ResumeJob", evaluator_pb2.JobRequest(id=job_id)))

    def cancel(self, job_id: str) -> JobStatus:
        """No new video starts; the committed results stay."""
        return _job(self._call("CancelJob", evaluator_pb2.JobRequest(id=job_id)))
