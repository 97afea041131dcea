"""theval.v1.EvaluatorService: scores videos through the four services with the engine's own
composition (core.stages.score), normalises them against stored GT reference sets, runs bulk
jobs. Here messages become Python values and back, and errors status codes (rpc.status); the
rules live in evaluator.reference_sets (GT reference sets) and evaluator.submitted_jobs (bulk jobs)."""
import json
import logging
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from theval_mesh.backends import liveness
from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.media.sources import BYTES_LABEL
from theval_mesh.core.stages import new_result, score
from theval_mesh.evaluator import streams
from theval_mesh.evaluator.reference_sets import GtVideo, ReferenceSets, VideoScores
from theval_mesh.evaluator.submitted_jobs import SubmittedJobs
from theval_mesh.jobs.job_telemetry import CACHE_LOOKUPS, observe_stages, register_jobs
from theval_mesh.pure.errors import VideoError
from theval_mesh.pure.scoring.final_score import parse_weights
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import telemetry, wire
from theval_mesh.rpc.config import MIB, Config
from theval_mesh.rpc.health import DependencyHealth
from theval_mesh.rpc.memory_budget import MemoryBudget, default_budget
from theval_mesh.rpc.protocol import RESULT_TRAILER
from theval_mesh.rpc.remote_stages import MeshClients
from theval_mesh.rpc.security import ClientSecurity, caller
from theval_mesh.rpc.server import Service
from theval_mesh.rpc.servicers.common import opened_video, run_settings
from theval_mesh.rpc.status import rpc, status_of
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc
from theval_mesh.stores import result_cache
from theval_mesh.stores.job_store import Job
from theval_mesh.stores.reference_store import Reference, ReferenceStore
from theval_mesh.stores.result_cache import ResultCache

log = logging.getLogger("theval.evaluator")

SERVICE = evaluator_pb2.DESCRIPTOR.services_by_name["EvaluatorService"].full_name
NO_DEADLINE_S = 24 * 3600.0


# The evaluator's own work ends this much before its caller's deadline (at most a tenth of the
# time): its answer, e.g. the last error naming the service it waited for, then reaches the caller
# before the caller gives up with a bare DEADLINE_EXCEEDED.
REPLY_MARGIN_S = 0.5
PROGRESS_POLL_S = 0.5  # how often CreateReferenceStream looks for a video scored


def _deadline(context) -> float:
    left = context.time_remaining()
    if left is None:
        return time.monotonic() + NO_DEADLINE_S
    return time.monotonic() + left - min(REPLY_MARGIN_S, 0.1 * left)


def _label(video_ref, name: str) -> str:
    if name:
        return name
    return video_ref.uri if video_ref.WhichOneof("source") == "uri" else BYTES_LABEL


def _outcome(error) -> str:
    return "ok" if error is None else "failed" if isinstance(error, VideoError) else "error"


class EvaluatorServicer(evaluator_pb2_grpc.EvaluatorServiceServicer):
    def __init__(self, config: Config, sets: ReferenceSets, jobs: SubmittedJobs, clients: MeshClients,
                 cache: ResultCache | None = None):
        self.config, self.sets, self.jobs, self.clients, self.cache = config, sets, jobs, clients, cache

    # ------------------------------------------------------------------ scoring one video
    def _score(self, video_ref, label: str, model: str, settings: RunSettings, deadline: float, cancelled=None):
        """(VideoResult, error): error is None, a VideoError (this video is bad: recorded in the
        result) or an internal error; the mesh's own failures raise ServiceError, and Cancelled
        once `cancelled` (backends.liveness) says the caller is gone."""
        with opened_video(video_ref, self.config) as path:
            provenance = self.clients.provenance(settings, deadline)
            digest = sha256_file(path) if self.cache else None
            if digest:
                outcome, cached = self.cache.lookup(digest, settings.key(), provenance)
                CACHE_LOOKUPS.labels(outcome).inc()
                if cached:
                    cached.model, cached.video, cached.reused = model, label, True
                    return cached, None
            result = new_result(model, label, settings, provenance)
            error = score(lambda: self.clients.open(video_ref, path, settings, deadline, cancelled), result,
                          settings)
            if digest and error is None:
                self.cache.keep(digest, settings.key(), provenance, result)
        if error is not None and result.reason and video_ref.WhichOneof("source") == "content":
            result.reason = result.reason.replace(path, BYTES_LABEL)  # a temporary file's name
            if isinstance(error, VideoError):
                error.reason = result.reason
        return result, error

    def _evaluate(self, request, deadline: float, who: str, cancelled=None):
        """(EvaluateResponse, None) for a scored video, (failed VideoResult, its error) else;
        errors of the request or of the mesh raise."""
        reference = self.sets.check_evaluate(request.reference, request.model, request.name, who)
        settings = self.sets.settings(reference, self._settings(request))
        label = _label(request.video, request.name)
        try:
            result, error = self._score(request.video, label, request.model, settings, deadline, cancelled)
        except Exception as err:
            telemetry.VIDEOS.labels(_outcome(err)).inc()
            raise
        telemetry.VIDEOS.labels(_outcome(error)).inc()
        if error is not None:
            return result, error
        if not result.reused:
            observe_stages(result.timings)
        response = evaluator_pb2.EvaluateResponse(result=wire.result_to_proto(result))
        if reference is not None:
            response.scores.CopyFrom(_scores_proto(self.sets.record(reference, result)))
        return response, None

    def _settings(self, request, default: RunSettings | None = None) -> RunSettings | None:
        return run_settings(request.settings, self.config) if request.HasField("settings") else default

    # ------------------------------------------------------------------ the API
    @rpc
    def Evaluate(self, request, context):
        who = caller(self.config.tokens, context)
        self.jobs.check_scope(who, request.model, request.video.uri, request.reference)
        answer, error = self._evaluate(request, _deadline(context), who, liveness.of_call(context))
        if error is not None:
            context.set_trailing_metadata(((RESULT_TRAILER, wire.result_to_proto(answer).SerializeToString()),))
            raise error
        return answer

    def EvaluateStream(self, request_iterator, context):
        """Videos are scored `concurrency` at a time as they arrive, none read ahead (rpc.servicers.streams);
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
        return _reference_proto(self._create_reference(request, context))

    def CreateReferenceStream(self, request, context):
        """CreateReference in a thread of its own; each GT video scored is a message as it ends."""
        scored: queue.Queue = queue.Queue()
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reference-stream") as pool:
                created = pool.submit(self._create_reference, request, context, scored.put)
                done = total = 0
                while not (created.done() and scored.empty()):
                    try:
                        label, total = scored.get(timeout=PROGRESS_POLL_S)
                    except queue.Empty:
                        continue
                    done += 1
                    yield evaluator_pb2.CreateReferenceProgress(done=done, total=total, video=label)
                yield evaluator_pb2.CreateReferenceProgress(done=done, total=total,
                                                            reference=_reference_proto(created.result()))
        except Exception as err:  # noqa: BLE001 - a status, as @rpc does for unary calls
            context.abort(*status_of(err))

    def _create_reference(self, request, context, on_scored=None) -> Reference:
        """on_scored((label, total)) as each GT video is scored."""
        who = caller(self.config.tokens, context)
        name = self.sets.check_create(request.name, who, request.replace)
        settings = self._settings(request, self.config.run)
        videos = self.sets.gt_videos([v.uri if v.WhichOneof("source") == "uri" else None for v in request.videos])
        deadline, cancelled = _deadline(context), liveness.of_call(context)
        digests = {}  # a file's label -> the SHA-256 of its bytes as scored: a job's GT may reuse its result

        def score_one(video: GtVideo):
            ref = request.videos[video.given] if video.uri is None else common_pb2.VideoRef(uri=video.uri)
            digest = sha256_file(video.local) if video.local and Path(video.local).is_file() else None
            outcome = self._score(ref, video.label, name, settings, deadline, cancelled)
            if digest:
                digests[video.label] = digest
            if on_scored is not None:
                on_scored((video.label, len(videos)))
            return outcome
        return self.sets.create(name, who, settings, videos, score_one, self.config.concurrency, digests)

    def _reader(self, context) -> tuple[str, bool]:
        """(the caller's identity, whether it is an admin)."""
        who = caller(self.config.tokens, context)
        return who, who in self.config.admins

    @rpc
    def Describe(self, request, context):
        """The provenance of results scored with these settings: the services' own descriptions,
        so a caller learns before scoring that one does not serve what the settings ask."""
        settings = run_settings(request.settings, self.config)
        provenance = self.clients.provenance(settings, _deadline(context))
        return common_pb2.DescribeResponse(backend="theval-evaluator", provenance_json=json.dumps(provenance))

    @rpc
    def ListReferences(self, request, context):
        refs = self.sets.listed(*self._reader(context), request.every_owner)
        return evaluator_pb2.ListReferencesResponse(references=[_reference_proto(r) for r in refs])

    @rpc
    def GetLeaderboard(self, request, context):
        owner = self.sets.owner_read(*self._reader(context), request.owner if request.HasField("owner") else None)
        weights = parse_weights(request.weights, files=False) if request.weights.strip() else None
        return wire.leaderboard_to_proto(self.sets.leaderboard(owner, request.reference, weights))

    # ------------------------------------------------------------------ bulk jobs (evaluator/submitted_jobs.py)
    @rpc
    def SubmitJob(self, request, context):
        owner = caller(self.config.tokens, context)
        inputs = self.jobs.inputs(request.gt_name, request.gt, [(m.name, m.path) for m in request.models])
        settings, deadline = self._settings(request, self.config.run), _deadline(context)

        def from_sets(gt: str, videos: list[str]) -> list:
            """The GT videos' results that the caller's reference sets hold (same bytes, settings
            and backends): not scored again."""
            return self.sets.gt_results(owner, settings, self.clients.provenance(settings, deadline), gt, videos)
        return _job_proto(self.jobs.submit(inputs, settings, request.workers, owner, from_sets))

    @rpc
    def GetJob(self, request, context):
        return _job_proto(self.jobs.get(request.id, caller(self.config.tokens, context)))

    def StreamJob(self, request, context):
        try:
            for job in self.jobs.updates(request.id, caller(self.config.tokens, context), context.is_active):
                yield _job_proto(job)
        except Exception as err:  # noqa: BLE001 - a status, as @rpc does for unary calls
            context.abort(*status_of(err))

    @rpc
    def ResumeJob(self, request, context):
        return _job_proto(self.jobs.resume(request.id, caller(self.config.tokens, context)))

    @rpc
    def CancelJob(self, request, context):
        return _job_proto(self.jobs.cancel(request.id, caller(self.config.tokens, context)))

    def GetJobResults(self, request, context):
        try:
            for result in self.jobs.results(request.id, caller(self.config.tokens, context)):
                yield wire.result_to_proto(result)
        except Exception as err:  # noqa: BLE001 - a status, as @rpc does for unary calls
            context.abort(*status_of(err))


def _scores_proto(scores: VideoScores) -> evaluator_pb2.Scores:
    row = scores.row
    return evaluator_pb2.Scores(reference=scores.reference, normalised=row.scores, groups=row.groups,
                                final_score=row.final, note=row.note, warnings=scores.warnings)


def _job_proto(job: Job) -> evaluator_pb2.Job:
    return evaluator_pb2.Job(
        id=job.id, state=job.state, total=job.total, done=job.done, failed=job.failed, remaining=job.remaining,
        rate=job.rate, eta_s=-1.0 if job.eta_s is None else job.eta_s, error=job.error or "",
        created_unix=job.created, started_unix=job.started or 0.0, finished_unix=job.finished or 0.0)


def _reference_proto(ref: Reference) -> evaluator_pb2.Reference:
    return evaluator_pb2.Reference(
        name=ref.name, owner=ref.owner, created_unix=ref.created, videos=ref.videos, scored=ref.scored, raw=ref.raw,
        counts=ref.counts, settings_json=json.dumps(ref.settings), provenance_json=json.dumps(ref.provenance),
        failures=[evaluator_pb2.VideoFailure(video=v, reason=r) for v, r in ref.failures])


def _driver_security(config: Config) -> ClientSecurity:
    """How the drivers of submitted jobs and their Ray actors reach this evaluator (each job adds a
    token of its own: evaluator.submitted_jobs): TLS trusting --tls-ca, else this server's own certificate
    (self-signed), checked for --advertise-tls-name when set; this server's certificate as client
    certificate under mutual TLS."""
    if not config.tls_cert:
        return ClientSecurity()
    client = (config.tls_cert, config.tls_key) if config.tls_client_ca else (None, None)
    return ClientSecurity(config.tls_ca or config.tls_cert, *client, server_name=config.advertise_tls_name)


def register(config: Config):
    # Opened before the server starts: a store that cannot be opened (empty, corrupt) stops it with
    # the reason, where a failure in load() would leave it NOT_SERVING with the reason in a log.
    store = ReferenceStore(config.store)
    jobs = SubmittedJobs(config.store, config.allowed_roots, config.ray_address, config.job_workers,
                         config.max_job_workers, config.max_jobs, config.advertise_host)
    register_jobs(jobs.store, per_job=False)  # jobs by state on /metrics, no job ids
    clients = MeshClients(config.dependencies, config.call_timeout_s, config.retries, config.max_message_bytes,
                          threads=4 * config.workers, security=config.client_security(),
                          memory=MemoryBudget(config.memory_budget_mb * MIB or default_budget(config.memory_limit_mb * MIB)))

    def on_change(name, up):
        telemetry.DEPENDENCY_UP.labels(name).set(1 if up else 0)
        clients.forget_provenance()

    deps = DependencyHealth({n: (clients.addresses[n], clients.channels[n]) for n in clients.addresses}, on_change)

    # The result cache lives in the evaluator's store when its deployment sets THEVAL_CACHE (not off).
    cache = ResultCache(config.store, warn=log.warning) if result_cache.enabled() else None
    servicer = EvaluatorServicer(config, ReferenceSets(store, config.allowed_roots, config.run, config.limits), jobs,
                                 clients, cache)
    jobs.trust_drivers(_driver_security(config), config.tokens or None)

    def add(server):
        evaluator_pb2_grpc.add_EvaluatorServiceServicer_to_server(servicer, server)
        return [SERVICE]

    def stop():
        jobs.close()
        clients.close()
        store.close()
        if cache:
            cache.close()
    # Clients send videos as bytes up to max_video_bytes: refuse anything much larger unread.
    return Service(add, readiness=deps.check, on_stop=stop, receive_limit=config.max_video_bytes + MIB,
                   on_bound=jobs.bound)
