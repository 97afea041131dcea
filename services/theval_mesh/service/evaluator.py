"""theval.v1.EvaluatorService: scores videos through the four services with the engine's own
composition (orchestrator.stages.score), normalises them against stored GT reference sets."""
import json
import logging
import math
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from theval_mesh.backends import liveness
from theval_mesh.backends.media.sources import BYTES_LABEL, resolve_uri
from theval_mesh.core import aggregate
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.core.stages import new_result, score
from theval_mesh.jobs.inputs import VIDEO_SUFFIXES
from theval_mesh.jobs.reference_store import Reference, ReferenceStore
from theval_mesh.pure.errors import AccessDenied, AlreadyExists, NotFound, UserError, VideoError
from theval_mesh.pure.scoring.final_score import RawRow, leaderboard
from theval_mesh.pure.scoring.names import NAME_OF_KEY
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import telemetry, wire
from theval_mesh.rpc.config import MIB, Config
from theval_mesh.rpc.health import DependencyHealth
from theval_mesh.rpc.protocol import RESULT_TRAILER
from theval_mesh.rpc.remote_stages import MeshClients
from theval_mesh.rpc.security import ClientSecurity, caller, check_name
from theval_mesh.rpc.server import Service
from theval_mesh.rpc.servicers.common import opened_video, run_settings
from theval_mesh.rpc.status import rpc, status_of
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc
from theval_mesh.service import streams
from theval_mesh.service.jobs import Jobs

log = logging.getLogger("theval.evaluator")
SERVICE = evaluator_pb2.DESCRIPTOR.services_by_name["EvaluatorService"].full_name
NO_DEADLINE_S = 24 * 3600.0
MAX_LABEL = 1024  # a video's display name
JOBS_IDENTITY = "theval-jobs"  # submitted jobs' drivers calling Evaluate


def _deadline(context) -> float:
    left = context.time_remaining()
    return time.monotonic() + (left if left is not None else NO_DEADLINE_S)


def _label(video_ref, name: str) -> str:
    if name:
        return name
    return video_ref.uri if video_ref.WhichOneof("source") == "uri" else BYTES_LABEL


def _outcome(error) -> str:
    return "ok" if error is None else "failed" if isinstance(error, VideoError) else "error"


class EvaluatorServicer(evaluator_pb2_grpc.EvaluatorServiceServicer):
    def __init__(self, config: Config, store: ReferenceStore, jobs: Jobs, clients: MeshClients):
        self.config, self.store, self.jobs, self.clients = config, store, jobs, clients

    # ------------------------------------------------------------------ scoring one video
    def _reference(self, name: str) -> Reference | None:
        if not name:
            return None
        ref = self.store.get(name)
        if ref is None:
            known = ", ".join(r.name for r in self.store.all()) or "none yet; create one with CreateReference"
            raise NotFound(f"no GT reference set named {name!r} (stored: {known})")
        return ref

    def _settings(self, request, reference: Reference | None) -> RunSettings:
        if request.HasField("settings"):
            return run_settings(request.settings, self.config)
        if reference is not None:
            return RunSettings.from_key(reference.settings, limits=self.config.limits)
        return self.config.run

    def _score(self, video_ref, label: str, model: str, settings: RunSettings, deadline: float, cancelled=None):
        """(VideoResult, error): error is None, a VideoError (this video is bad: recorded in the
        result) or an internal error; the mesh's own failures raise ServiceError, and Cancelled
        once `cancelled` (common.liveness) says the caller is gone."""
        with opened_video(video_ref, self.config) as path:
            provenance = self.clients.provenance(settings, deadline)
            result = new_result(model, label, settings, provenance)
            error = score(lambda: self.clients.open(video_ref, path, settings, deadline, cancelled), result,
                          settings)
        if error is not None and result.reason and video_ref.WhichOneof("source") == "content":
            result.reason = result.reason.replace(path, BYTES_LABEL)  # a temporary file's name
            if isinstance(error, VideoError):
                error.reason = result.reason
        return result, error

    def _evaluate(self, request, deadline: float, who: str, cancelled=None):
        """(EvaluateResponse, None) for a scored video, (failed VideoResult, its error) else;
        errors of the request or of the mesh raise."""
        if request.model:
            check_name("model", request.model)
        if len(request.name) > MAX_LABEL or not request.name.isprintable():
            raise UserError(f"name: at most {MAX_LABEL} printable characters, not {len(request.name)}")
        reference = self._reference(request.reference)
        if reference is not None and request.model == reference.name:
            raise UserError(f"model {request.model!r} has the name of the reference set; name it otherwise")
        if reference is not None and request.model and self.store.model_owner(reference.name, request.model) not in (
                None, who):
            raise AccessDenied(f"model {request.model!r} against {reference.name!r} was scored by another caller: "
                               "name yours otherwise")
        settings = self._settings(request, reference)
        label = _label(request.video, request.name)
        try:
            result, error = self._score(request.video, label, request.model, settings, deadline, cancelled)
        except Exception as err:
            telemetry.VIDEOS.labels(_outcome(err)).inc()
            raise
        telemetry.VIDEOS.labels(_outcome(error)).inc()
        if error is not None:
            return result, error
        response = evaluator_pb2.EvaluateResponse(result=wire.result_to_proto(result))
        if reference is not None:
            response.scores.CopyFrom(_scores(result, reference))  # refused when scored unlike the GT
            if request.model:
                self.store.add_scored(reference.name, result, who)  # durable before the answer
        return response, None

    # ------------------------------------------------------------------ the API
    @rpc
    def Evaluate(self, request, context):
        answer, error = self._evaluate(request, _deadline(context), caller(self.config.tokens, context),
                                       liveness.of_call(context))
        if error is not None:
            context.set_trailing_metadata(((RESULT_TRAILER, wire.result_to_proto(answer).SerializeToString()),))
            raise error
        return answer

    def EvaluateStream(self, request_iterator, context):
        """Videos are scored `concurrency` at a time as they arrive, none read ahead (servicers.streams);
        answers go back as each finishes. A client that goes away stops the videos in progress."""
        deadline, who = _deadline(context), caller(self.config.tokens, context)
        c = self.config
        yield from streams.answered_as_they_finish(
            request_iterator, context, lambda request, cancelled: self._stream_item(request, deadline, who, cancelled),
            c.concurrency, c.stream_idle_s, c.stream_max_s)

    def _stream_item(self, request, deadline, who: str, cancelled=None) -> evaluator_pb2.EvaluateStreamResponse:
        out = evaluator_pb2.EvaluateStreamResponse(id=request.id)
        try:
            answer, error = self._evaluate(request, deadline, who, cancelled)
        except Exception as err:  # noqa: BLE001 - one video's failure is reported in its own response
            error, answer = err, None
        if error is None:
            out.response.CopyFrom(answer)
            return out
        code, out.detail = status_of(error)
        out.code = code.value[0]
        if answer is not None:  # the failed result of a bad video
            out.response.result.CopyFrom(wire.result_to_proto(answer))
        return out

    @rpc
    def CreateReference(self, request, context):
        name, who = check_name("reference set name", request.name), caller(self.config.tokens, context)
        existing = self.store.get(name)
        if existing is not None and not request.replace:
            raise AlreadyExists(f"a reference set named {name!r} exists; set replace to score it again")
        if existing is not None and existing.owner != who:
            raise AccessDenied(f"the reference set {name!r} belongs to another caller: only it may replace it")
        settings = run_settings(request.settings, self.config) if request.HasField("settings") else self.config.run
        videos = self._expand(request.videos)
        deadline, cancelled = _deadline(context), liveness.of_call(context)
        with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="reference") as pool:
            scored = list(pool.map(lambda v: self._score(v[0], v[1], name, settings, deadline, cancelled), videos))
        for _, error in scored:
            if error is not None and not isinstance(error, VideoError):
                raise error
        results = [r for r, _ in scored]
        row = aggregate.model_rows(results, [name])[0]
        failures = [(r.video, r.reason) for r in results if r.status != OK]
        if row.provenance is None:
            raise UserError(f"no video of the GT set could be scored; first failure: {failures[0][0]}: "
                            f"{failures[0][1]}")
        bad = [m for m, v in row.values.items() if math.isnan(v) or abs(v) <= 1e-9]
        if bad:
            why = _nan_reasons(results, bad)
            raise UserError(f"GT set {name!r} cannot normalise {', '.join(bad)} (zero or NaN over all its "
                            f"videos{': ' + why if why else ''}); add videos that have it")
        ref = Reference(name=name, settings=settings.key(), provenance=row.provenance, raw=row.values,
                        counts=row.counts, videos=len(results), scored=len(results) - len(failures),
                        failures=failures, owner=who)
        self.store.put(ref, results)
        log.info("reference set %r stored: %d videos scored, %d failed", name, ref.scored, len(failures))
        return _reference_proto(ref)

    def _expand(self, refs) -> list[tuple]:
        """(VideoRef, label) for every video given, folders searched recursively."""
        out = []
        for i, ref in enumerate(refs):
            if ref.WhichOneof("source") != "uri":
                out.append((ref, f"{BYTES_LABEL} #{i}"))
                continue
            path = Path(resolve_uri(ref.uri, self.config.allowed_roots))
            if not path.is_dir():
                out.append((ref, ref.uri))
                continue
            for f in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES):
                out.append((common_pb2.VideoRef(uri=str(f)), str(f)))
        if not out:
            raise UserError("no videos: give files, or folders holding "
                            f"{', '.join(VIDEO_SUFFIXES)} files, under the allowed roots")
        return out

    @rpc
    def ListReferences(self, request, context):
        return evaluator_pb2.ListReferencesResponse(references=[_reference_proto(r) for r in self.store.all()])

    @rpc
    def GetLeaderboard(self, request, context):
        reference = self._reference(request.reference)
        if reference is None:
            raise UserError("name the reference set")
        results = self.store.scored(reference.name)
        models = sorted({r.model for r in results})
        rows = [reference.row()] + aggregate.model_rows(results, models)
        board = leaderboard(rows, gt_name=reference.name, weights=request.weights or None)
        out = evaluator_pb2.Leaderboard(reference=reference.name, weights=board.weights, warnings=board.warnings)
        for r in board.rows:
            out.rows.add(model=r.model, scores=r.scores, groups=r.groups, final_score=r.final, rank=r.rank or 0,
                         counts=r.counts or {}, is_gt=r.is_gt, note=r.note)
        return out


    # ------------------------------------------------------------------ bulk jobs (servicers/jobs.py)
    @rpc
    def SubmitJob(self, request, context):
        return self.jobs.submit(request, caller(self.config.tokens, context))

    @rpc
    def GetJob(self, request, context):
        return self.jobs.get(request.id, caller(self.config.tokens, context))

    def StreamJob(self, request, context):
        try:
            yield from self.jobs.stream(request.id, caller(self.config.tokens, context), context)
        except Exception as err:  # noqa: BLE001 - a status, as @rpc does for unary calls
            context.abort(*status_of(err))

    @rpc
    def CancelJob(self, request, context):
        return self.jobs.cancel(request.id, caller(self.config.tokens, context))

    def GetJobResults(self, request, context):
        try:
            for result in self.jobs.results(request.id, caller(self.config.tokens, context)):
                yield wire.result_to_proto(result)
        except Exception as err:  # noqa: BLE001 - a status, as @rpc does for unary calls
            context.abort(*status_of(err))


def _nan_reasons(results, metrics) -> str:
    keys = {NAME_OF_KEY[k]: k for k in NAME_OF_KEY}
    reasons = []
    for m in metrics:
        found = {r.nan_reasons.get(keys[m]) for r in results if r.status == OK} - {None}
        if found:
            reasons.append(f"{m}: {'; '.join(sorted(found))}")
    return ", ".join(reasons)


def _scores(result: VideoResult, reference: Reference) -> evaluator_pb2.Scores:
    """The video's normalised scores against the GT set (refused when scored differently)."""
    label = result.model or "this video"
    values = {NAME_OF_KEY[k]: v for k, v in result.metrics.items()}
    row = RawRow(label, values, None, result.provenance)
    board = leaderboard([reference.row(), row], gt_name=reference.name)
    scored = board.row(label)
    return evaluator_pb2.Scores(reference=reference.name, normalised=scored.scores, groups=scored.groups,
                                final_score=scored.final, note=scored.note, warnings=board.warnings)


def _reference_proto(ref: Reference) -> evaluator_pb2.Reference:
    return evaluator_pb2.Reference(
        name=ref.name, created_unix=ref.created, videos=ref.videos, scored=ref.scored, raw=ref.raw,
        counts=ref.counts, settings_json=json.dumps(ref.settings), provenance_json=json.dumps(ref.provenance),
        failures=[evaluator_pb2.VideoFailure(video=v, reason=r) for v, r in ref.failures])


def _driver_security(config: Config) -> ClientSecurity:
    """How the drivers of submitted jobs reach this evaluator: a token of their own (added to the
    accepted ones, identity JOBS_IDENTITY) when callers need one; TLS trusting --tls-ca, else this
    server's own certificate (self-signed), with it as client certificate under mutual TLS."""
    token = None
    if config.tokens:
        token = secrets.token_urlsafe(32)
        config.tokens.add(JOBS_IDENTITY, token)
    if not config.tls_cert:
        return ClientSecurity(token=token)
    client = (config.tls_cert, config.tls_key) if config.tls_client_ca else (None, None)
    return ClientSecurity(config.tls_ca or config.tls_cert, *client, token)


def register(config: Config):
    # Opened before the server starts: a store that cannot be opened (empty, corrupt) stops it with
    # the reason, where a failure in load() would leave it NOT_SERVING with the reason in a log.
    store = ReferenceStore(config.store)
    jobs = Jobs(config)
    clients = MeshClients(config.dependencies, config.call_timeout_s, config.retries, config.max_message_bytes,
                          threads=4 * config.workers, security=config.client_security())

    def on_change(name, up):
        telemetry.DEPENDENCY_UP.labels(name).set(1 if up else 0)
        clients.forget_provenance()

    deps = DependencyHealth({n: (clients.addresses[n], clients.channels[n]) for n in clients.addresses}, on_change)

    servicer = EvaluatorServicer(config, store, jobs, clients)
    jobs.trust_drivers(_driver_security(config))

    def add(server):
        evaluator_pb2_grpc.add_EvaluatorServiceServicer_to_server(servicer, server)
        return [SERVICE]

    def stop():
        jobs.close()
        clients.close()
        store.close()
    # Clients send videos as bytes up to max_video_bytes: refuse anything much larger unread.
    return Service(add, readiness=deps.check, on_stop=stop, receive_limit=config.max_video_bytes + MIB,
                   on_bound=jobs.bound)
