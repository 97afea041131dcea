"""Run a job: score its pending videos and commit each result to the job store as it arrives.

Two runners share the loop's rules (bad videos are failed results; transient failures retry):
  - run_ray: Ray actors, one per worker, each holding what scoring needs: the in-process models
    (Engine) or a channel to the mesh's evaluator (MeshEngine). Each actor has at most
    QUEUED_PER_ACTOR videos queued and the driver reads pending items a page at a time, so the
    driver's memory stays flat whatever the job's size (backpressure).
  - run_inline: the same loop in this process, no Ray (`--inline`; the benchmark's baseline).

A transient failure (the mesh unavailable, an actor that died) puts the video back in the queue,
up to MAX_ATTEMPTS times, after a growing pause. Past that, the job stops "interrupted" with the
reason, nothing recorded for that video: `theval bulk resume` scores it later. A video's own fault
(unreadable, outside the allowed roots, refused by the mesh as invalid) is never retried: it is
that video's failed result, with the reason.
"""
import os
import sys
import threading
import time
from collections import deque

from theval_mesh.backends.native_logs import QUIET
from theval_mesh.core.incidents import logged_for_operator, logged_internal
from theval_mesh.core.inputs import Item
from theval_mesh.core.preflight import before_work
from theval_mesh.core.results import FAILED, VideoResult
from theval_mesh.jobs import job_telemetry
from theval_mesh.pure.errors import Cancelled, ServiceError, UserError, VideoError
from theval_mesh.pure.inference import InferenceOptions
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc.security import ClientSecurity
from theval_mesh.stores.job_store import HEARTBEAT_S, JobSpec, JobStore, StoreFull
from theval_mesh.stores.result_cache import HIT, open_cache

QUEUED_PER_ACTOR = 2
MAX_ATTEMPTS = 8
FIRST_PAUSE_S, LAST_PAUSE_S = 0.5, 15.0  # ~1 min of retries in all: a mesh service restarts in it
# The mesh's answers that blame the request, not the mesh: a retry would get the same answer.
VIDEO_FAULTS = ("INVALID_ARGUMENT", "PERMISSION_DENIED", "NOT_FOUND", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED")


class JobStopped(Exception):
    """The job could not go on (a transient failure outlived its retries, or every actor died)."""


def _settings(spec) -> RunSettings:
    return RunSettings.from_key(spec.settings)


def _inference(spec) -> InferenceOptions:
    return InferenceOptions(**(spec.inference or {}))


def _quiet_env():
    os.environ.update(QUIET)


class ScoringWorker:
    """Scores one video at a time; a Ray actor in run_ray, a plain object in run_inline.
    security: how it reaches the mesh (default: this process's environment, rpc.security)."""

    def __init__(self, spec, threads: int = 0, security=None):
        _quiet_env()
        self.spec = spec
        settings = _settings(spec)
        if spec.mesh:
            from theval_mesh.rpc.mesh_engine import MeshEngine
            self.engine = MeshEngine(spec.mesh, settings, security=security)
        else:
            from theval_mesh.core.engine import Engine
            if threads and _loads_models(spec):  # before the networks load: their runtimes take it
                import torch  # not imported at all for the proxy's networks-free run
                torch.set_num_threads(threads)
            self.engine = Engine(settings, spec.weights_store, _inference(spec))

    def score(self, model: str, video: str, on_frames=None, cancelled=None) -> tuple[str, VideoResult | str]:
        """("ok", its VideoResult) or ("retry", why): a bad video is a failed result; only
        the mesh's own failures (down, restarting) are retried. on_frames(n): frames decoded;
        cancelled (backends.liveness): Cancelled is raised mid-video once it fires."""
        try:
            return "ok", self.engine.score_video(video, model, on_frames, cancelled)
        except Cancelled:
            raise
        except ServiceError as err:
            if err.code not in VIDEO_FAULTS:  # the mesh failed, not the video
                return "retry", f"{err.code}: {err}"
            reason = str(err)
        except VideoError as err:
            reason = err.reason
        except UserError as err:  # e.g. outside the allowed roots
            reason = str(err)
        except OSError as err:  # e.g. a name over the file system's limit
            reason = f"cannot be read: {err.strerror or err}"
        except Exception as err:  # noqa: BLE001 - one video never stops the job: its failure, with an id
            reason = logged_internal(err, f"scoring {video}")
        return "ok", VideoResult(model, video, FAILED, reason, settings=self.spec.settings)


def new_spec(inputs, settings: RunSettings, quiet: bool = False, items=None, allow_unpaired: bool = False,
             **options) -> JobSpec:
    """The spec of a job over [(name, path), ...] (the GT first), checked now: its arguments, then
    the inputs' `items` (core.preflight.before_work: before any model loads), then check(); the
    lines about the inputs and the quality notice go to stderr unless `quiet`."""
    spec = JobSpec(inputs=[list(i) for i in inputs], settings=settings.key(), **options)
    if items is not None:
        for line in before_work([tuple(i) for i in inputs], items, spec.gt_name, settings.limits,
                                spec.partial_score, allow_unpaired):
            if not quiet:
                print(line, file=sys.stderr)
    notice = check(spec)
    if notice and not quiet:
        print(notice, file=sys.stderr)
    return spec


def check(spec) -> str | None:
    """Stop now, with one clear line, on what would fail every video: missing weights for
    --quality paper, a mesh that does not answer. Returns the quality notice (embedded)."""
    settings = _settings(spec)
    if spec.mesh:
        # The services say what they serve for these settings: --headpose facexformer of a
        # head-pose service serving the rigid fit stops here, naming the fix (auto follows it).
        _mesh_provenance(spec)
        return None
    from theval_mesh.backends.headpose.facexformer import choose
    from theval_mesh.backends.inference.plan import check_options
    from theval_mesh.backends.quality.backend import QualityBackend
    check_options(_inference(spec))  # e.g. --device cuda without a GPU: refused now, exit 2
    quality = QualityBackend(mode=settings.quality, profile=settings.profile, store=spec.weights_store).notice
    return f"{quality}\n{choose(settings.headpose, spec.weights_store)[1]}"


def expected_provenance(spec) -> dict:
    """The provenance the job's results will carry (cheap: no model is loaded), for the result
    cache's key before anything is scored."""
    if spec.mesh:
        return _mesh_provenance(spec)
    from theval_mesh.core.provenance import expected
    return expected(_settings(spec), spec.weights_store, _inference(spec))


def _mesh_provenance(spec) -> dict:
    """What the mesh's services serve for the spec's settings (one short-lived connection)."""
    from theval_mesh.rpc.mesh_engine import MeshEngine
    engine = MeshEngine(spec.mesh, _settings(spec))
    try:
        return engine.provenance()
    finally:
        engine.close()


def _loads_models(spec) -> bool:
    """Whether the expected provenance loads networks (paper quality, FaceXFormer; in-process)."""
    from theval_mesh.backends.headpose import facexformer
    from theval_mesh.backends.quality.backend import QualityBackend
    settings = _settings(spec)
    return not spec.mesh and (QualityBackend(mode=settings.quality, profile=settings.profile,
                                             store=spec.weights_store).resolved_mode != "proxy"
                              or facexformer.choose(settings.headpose, spec.weights_store)[0])


def _fingerprint(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _missing(item: Item, spec) -> VideoResult:
    return VideoResult(item.model, item.video, FAILED, item.missing, settings=spec.settings)


# What a remote caller reads in Job.error, per final state, for a job submitted to an evaluator.
FOR_OWNER = {"failed": "the job could not run on the evaluator's side",
             "interrupted": "the job stopped before every video was scored (a resume scores the rest)"}


def _for_owner(spec: JobSpec, state: str, why: str, job_id: str) -> str:
    """Job.error: `why` as it is for a job of this machine's user (the CLI's); for a job submitted
    to an evaluator (spec.owner), a line without the server's addresses and paths that `why` may
    name (the mesh, the store, Ray), which go to the evaluator's log under an id."""
    if not spec.owner:
        return why
    return logged_for_operator(why, FOR_OWNER.get(state, f"the job ended {state}"), f"job {job_id}")


class _Loop:
    """What both runners share: pending items a page at a time, commits, retries, heartbeat,
    progress and metrics. The heartbeat has a thread of its own: it says the driver is alive
    while the work blocks (a long video inline, a Ray start or a `ray://` connection that takes
    more than the store's STALE_S on a busy machine), and brings a cancel request in meanwhile."""

    def __init__(self, store: JobStore, job_id: str, on_result=None, provenance=None, checked: bool = False):
        """provenance(): what the job's results will carry (default expected_provenance), asked
        once, at the first cache lookup. checked: the caller ran check() on the job's spec just
        now (new_spec); else it runs here, for a job made earlier (resume, a queued job)."""
        self.store, self.job_id, self.on_result = store, job_id, on_result
        try:
            if not checked:
                check(store.get(job_id).spec)
        except UserError as err:  # e.g. weights deleted, the mesh down: say so in the job
            store.finish(job_id, "failed", _for_owner(store.get(job_id).spec, "failed", str(err), job_id))
            raise
        self.job = store.claim(job_id)
        self.spec = self.job.spec
        self.after = -1
        self.drained = False  # every pending item of the store has been read
        self.page: deque = deque()
        self.retry: deque = deque()   # (ready_at, seq, item)
        self.attempts: dict = {}      # seq -> transient failures so far
        self.cancelled = False
        self.cache = open_cache(self.spec.cache, warn=lambda line: print(f"warning: {line}", file=sys.stderr))
        self._provenance, self.provenance = provenance or (lambda: expected_provenance(self.spec)), None
        self.digests: dict = {}  # seq -> (sha256, (size, mtime)) of a video the cache missed
        job_telemetry.JOBS_RUNNING.inc()
        self._stop_beating = threading.Event()
        self._beating = threading.Thread(target=self._beat, name=f"heartbeat-{job_id}", daemon=True)
        self._beating.start()

    def next_item(self):
        """(seq, item) to score now, or None (nothing ready yet or left)."""
        if self.retry and self.retry[0][0] <= time.monotonic():
            _, seq, item = self.retry.popleft()
            return seq, item
        while not self.page:
            rows = [] if self.drained else self.store.pending(self.job_id, self.after)
            if not rows:
                self.drained = True  # items are fixed when the job is created: none will come
                return None
            self.after = rows[-1][0]
            for seq, item in rows:
                if item.missing:  # cannot even be opened: a failed result, no scoring
                    self.commit(_missing(item, self.spec))
                elif not self._from_cache(seq, item):
                    self.page.append((seq, item))
        return self.page.popleft()

    def _from_cache(self, seq: int, item: Item) -> bool:
        """Commit the cached result of this video's bytes if there is one (True); else remember
        its digest, to keep the result it will be scored to."""
        if self.cache is None:
            return False
        from theval_mesh.backends.checksum import sha256_file
        try:
            before = _fingerprint(item.video)
            digest = sha256_file(item.video)
        except OSError:
            return False  # scoring says what is wrong with it
        if self.provenance is None:
            self.provenance = self._provenance()
        outcome, result = self.cache.lookup(digest, self.spec.settings, self.provenance)
        job_telemetry.CACHE_LOOKUPS.labels(outcome).inc()
        if outcome != HIT:
            self.digests[seq] = (digest, before)
            return False
        result.model, result.video, result.reused = item.model, item.video, True
        self.commit(result)
        return True

    def scored(self, seq: int, item: Item, result: VideoResult):
        """Commit a result a worker scored; keep it in the cache unless the file changed meanwhile."""
        digest, before = self.digests.pop(seq, (None, None))
        if digest and result.status != FAILED:
            try:
                unchanged = _fingerprint(item.video) == before
            except OSError:
                unchanged = False
            if unchanged:
                self.cache.keep(digest, self.spec.settings, self.provenance, result)
        self.commit(result)

    def exhausted(self) -> bool:
        return self.drained and not self.page and not self.retry

    def commit(self, result: VideoResult):
        self.store.commit(self.job_id, result)
        job_telemetry.JOB_VIDEOS.labels("failed" if result.status == FAILED else "ok").inc()
        if not result.reused:  # computed now, not by the run that cached it
            job_telemetry.observe_stages(result.timings)
        if self.on_result:
            self.on_result(result)

    def transient(self, seq: int, item: Item, why: str):
        n = self.attempts[seq] = self.attempts.get(seq, 0) + 1
        job_telemetry.JOB_RETRIES.inc()
        if n >= MAX_ATTEMPTS:
            raise JobStopped(f"{item.video} could not be scored after {n} attempts ({why}); the job stopped "
                             f"with nothing recorded for it: `theval bulk resume {self.job_id}` once the cause is fixed")
        pause = min(FIRST_PAUSE_S * 2 ** (n - 1), LAST_PAUSE_S)
        self.retry.append((time.monotonic() + pause, seq, item))

    def _beat(self):
        warned = False
        while not self._stop_beating.wait(HEARTBEAT_S):
            try:
                self.cancelled = self.store.beat(self.job_id) or self.cancelled
            except Exception as err:  # noqa: BLE001 - e.g. a full disk, a database restarting: try again
                if not warned:  # a full disk also stops the next commit, resumable
                    print(f"warning: heartbeat not recorded, will retry: {err}", file=sys.stderr)
                    warned = True

    def end(self, error: BaseException | None) -> None:
        self._stop_beating.set()
        self._beating.join()
        job_telemetry.JOBS_RUNNING.dec()
        if self.cache:
            self.cache.close()
        if error is None:
            state, why = ("cancelled" if self.cancelled else "done"), None
        elif isinstance(error, KeyboardInterrupt):  # resumable as it is
            state, why = "interrupted", None
        elif isinstance(error, (JobStopped, UserError)):  # one line written for the user
            state = "interrupted" if isinstance(error, (JobStopped, StoreFull)) else "failed"  # those resumable as they are
            why = _for_owner(self.spec, state, str(error), self.job_id)
        else:  # Ray's or ours: its text may carry tracebacks, hosts and pids; the log has it under an id
            state, why = "failed", logged_internal(error, f"job {self.job_id}")
        job_telemetry.JOBS_FINISHED.labels(state).inc()
        try:
            self.store.finish(self.job_id, state, why)
        except StoreFull:
            if error is None:
                raise
            # Not recorded, and the first error is the one to report: the job reads "interrupted"
            # once this driver is gone.


def _run(loop: _Loop, body):
    error = None
    try:
        body()
    except BaseException as err:
        error = err
        raise
    finally:
        loop.end(error)
    return loop.store.get(loop.job_id)


def run_inline(store: JobStore, job_id: str, on_result=None, on_frames=None, checked: bool = False):
    """Score the job's pending videos one at a time in this process; on_frames(n, total=None) as
    they are decoded (a long video's progress; total: its frames, announced with n=0 as its pass
    starts); checked: as _Loop's."""
    scorers = []  # made at the first video to score: none when every video is cached

    def scorer() -> ScoringWorker:
        if not scorers:
            scorers.append(ScoringWorker(loop.spec))
        return scorers[0]

    def provenance() -> dict:
        # Paper quality loads its models to checksum them: load them once, in the scorer.
        return scorer().engine.provenance() if _loads_models(loop.spec) else expected_provenance(loop.spec)
    loop = _Loop(store, job_id, on_result, provenance, checked)

    def cancel_reason():  # a cancel the heartbeat brought in stops the video being scored, mid-video
        return "CANCELLED" if loop.cancelled else None

    def body():
        while not loop.cancelled:
            nxt = loop.next_item()
            if nxt is None:
                if loop.exhausted():
                    return
                time.sleep(0.05)  # a retry is waiting for its pause
                continue
            seq, item = nxt
            try:
                kind, payload = scorer().score(item.model, item.video, on_frames, cancel_reason)
            except Cancelled:
                return  # the video stays pending; the job ends "cancelled"
            if kind == "ok":
                loop.scored(seq, item, payload)
            else:
                loop.transient(seq, item, payload)
    return _run(loop, body)


def start_ray(address: str | None, workers: int):
    """Connect to a Ray cluster (`address`), or start a local one sized for `workers`. Call it
    from a thread that outlives the job: Ray's local processes die with the thread that started
    them (their parent-death signal)."""
    import ray
    _quiet_env()
    if address:
        _connect_ray(ray, address)
        return
    _private_ray()
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        started_before = set(_descendants())
        try:
            # address="local": a new Ray of our own, never a `ray start` cluster that happens to run
            # here (ray.init() without an address attaches to one).
            ray.init(address="local", num_cpus=max(workers, os.cpu_count() or 1), include_dashboard=False,
                     logging_level="ERROR", log_to_driver=False, object_store_memory=128 << 20)
            return
        except Exception as err:  # Ray raises a bare Exception for a node that did not come up
            if not any(sign in str(err) for sign in STARTUP_TIMEOUTS):
                raise
            _stop_half_started_ray(started_before)  # also after the last attempt: nothing left running
            if attempt == LOCAL_START_ATTEMPTS:
                raise
            print(f"warning: the local Ray did not come up within Ray's own time limits (a busy machine?); "
                  f"starting it again (attempt {attempt + 1} of {LOCAL_START_ATTEMPTS})", file=sys.stderr)


# Ray waits fixed times for its new node to register (30 s, ray/_private/node.py) and for its GCS
# to write its port file; a busy 2-core machine missed each of them once in CI. Started again, it
# comes up.
LOCAL_START_ATTEMPTS = 3
STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")
RAY_PROCESSES = ("gcs_server", "raylet", "/ray/")  # in the command lines of the processes a local Ray starts


def _descendants() -> dict[int, str]:
    """{pid: command line} of this process's descendants, from /proc ({} where there is none)."""
    parent, command = {}, {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError, IndexError):  # gone meanwhile
                continue
    mine, level = {}, {os.getpid()}
    while level:
        level = {pid for pid, ppid in parent.items() if ppid in level and pid not in mine}
        mine.update({pid: command[pid] for pid in level})
    return mine


def _stop_half_started_ray(started_before: set):
    """Kill what a failed ray.init left running: Ray's processes this process started since."""
    import signal

    killed = []
    for pid, command in _descendants().items():
        if pid not in started_before and any(name in command for name in RAY_PROCESSES):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    # kill() returns before the process is gone: on a busy machine a killed GCS still ran (and
    # showed its command line) a moment later (seen in CI). Wait until each has exited.
    deadline = time.monotonic() + KILL_WAIT_S
    while any(_running(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.02)


KILL_WAIT_S = 10.0


def _running(pid: int) -> bool:
    """Whether `pid` still runs: not gone and not a zombie (exited, waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


CONNECT_ATTEMPTS = 3


def _connect_ray(ray, address: str, pause_s: float = 2.0):
    """ray.init(address), tried again when the cluster answered but could not start this
    driver's side of it: a Ray Client server (`ray://`) starts a server process per driver
    (ray/util/client/server/proxier.py, start_specific_server) and, when that process fails to
    start or to answer, the driver gets "Initialization failure from server" and the proxy's
    traceback. On a busy machine that process can die at its fork: gRPC's fork handlers in the
    proxy abort the child (seen in CI and reproduced here: "SpecificServer startup failed",
    "Check failed: next_worker->state == KICKED"). The next attempt forks a new one on a new
    port. An address where nothing answers fails on the first attempt (after Ray's own 30 s
    timeout)."""
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            return
        except ConnectionError as err:
            server_side = str(err).startswith("Initialization failure from server")  # ray/util/client/worker.py
            if not server_side:
                raise UserError(f"--ray-address {address}: no Ray cluster answers there ({err})") from None
            if attempt == CONNECT_ATTEMPTS:
                raise UserError(f"--ray-address {address}: the Ray Client server there failed to start a "
                                f"session {attempt} times; its logs on the head say why ({err})") from None
            print(f"warning: --ray-address {address}: the Ray Client server failed to start this driver's "
                  f"session (attempt {attempt} of {CONNECT_ATTEMPTS}); trying again", file=sys.stderr)
            ray.shutdown()
            time.sleep(pause_s)


_ray_token: str | None = None  # the token of this process's local Rays (_private_ray)


def _private_ray():
    """A local Ray runs any code sent to it: keep it on loopback, behind a token of its own.
    Ray binds its servers to the node's IP and turns a loopback IP into the machine's address
    unless multi-node clusters are off (ray/_private/services.py get_node_ip_address reads
    ray_constants.ENABLE_RAY_CLUSTER, the env RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER at import; the
    started processes are given the node IP). Token authentication: Ray (>= 2.59) turns it on for
    a new local cluster when RAY_AUTH_MODE is unset, so an explicit "disabled" is dropped; the
    token is this process's own random one (inherited by Ray's processes), not ~/.ray/auth_token,
    and the same for every local Ray this process starts: Ray reads the token once per process and
    keeps it, so a second Ray given another one would refuse its own driver."""
    import secrets

    from ray._private import ray_constants
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    if os.environ.pop("RAY_AUTH_MODE", "token").lower() != "token":
        print("warning: RAY_AUTH_MODE ignored: the local Ray always requires its token", file=sys.stderr)
    global _ray_token
    _ray_token = _ray_token or os.environ.get("RAY_AUTH_TOKEN") or secrets.token_hex(32)
    os.environ["RAY_AUTH_TOKEN"] = _ray_token


def run_ray(store: JobStore, job_id: str, workers: int, ray_address: str | None = None, on_result=None,
            checked: bool = False):
    """Score the job's pending videos on `workers` Ray actors: on the cluster at `ray_address`,
    else on a local Ray; a Ray this call started or connected to is shut down at the end;
    checked: as _Loop's."""
    import ray
    loop = _Loop(store, job_id, on_result, checked=checked)
    started_here = not ray.is_initialized()

    def body():
        first = loop.next_item()  # a Ray and its actors only when something is left to score
        if first is None and loop.exhausted():  # e.g. every video was in the result cache
            return
        if first is not None:
            loop.page.appendleft(first)
        if started_here:
            start_ray(ray_address, workers)
        mesh = bool(loop.spec.mesh)
        threads = 0 if mesh else max(1, (os.cpu_count() or 1) // workers)
        # The actors of a cluster started elsewhere have neither this process's environment nor
        # its files: they are given the mesh's CA and token as an argument, not as a runtime_env's
        # env_vars, which the cluster's job and actor listings show. The argument still lives in
        # the cluster's GCS while the job runs: the evaluator gives each job a token of its own and
        # revokes it when the job ends (evaluator.submitted_jobs).
        security = ClientSecurity.from_env().portable() if mesh else None
        actor_class = ray.remote(ScoringWorker).options(num_cpus=0 if mesh else 1, max_restarts=0)
        actors = [actor_class.remote(loop.spec, threads, security) for _ in range(workers)]
        load = {a: 0 for a in actors}
        flying: dict = {}  # ObjectRef -> (actor, seq, item)
        actor_failures = 0
        while True:
            for actor in sorted(load, key=load.get):  # least loaded first
                while load[actor] < QUEUED_PER_ACTOR and not loop.cancelled:
                    nxt = loop.next_item()
                    if nxt is None:
                        break
                    seq, item = nxt
                    flying[actor.score.remote(item.model, item.video)] = (actor, seq, item)
                    load[actor] += 1
            job_telemetry.JOB_IN_FLIGHT.set(len(flying))
            if not flying:
                if loop.cancelled or loop.exhausted():
                    return
                time.sleep(0.05)  # only retries waiting for their pause
                continue
            ready, _ = ray.wait(list(flying), num_returns=1, timeout=1.0)
            for ref in ready:
                actor, seq, item = flying.pop(ref)
                if actor in load:  # not when it died and was replaced already (its other calls fail too)
                    load[actor] -= 1
                try:
                    kind, payload = ray.get(ref)
                except ray.exceptions.RayActorError as err:  # died (OOM, crash): replace it
                    actor_failures += 1
                    # Ray's text names hosts, pids and actor ids: logged, the job shows the id.
                    why = f"a Ray worker died ({logged_internal(err, f'job {loop.job_id}')})"
                    if actor_failures > MAX_ATTEMPTS * workers:
                        raise JobStopped(f"Ray workers keep dying; the last: {why}") from None
                    if actor in load:
                        del load[actor]
                        new = actor_class.remote(loop.spec, threads, security)
                        load[new] = 0
                    loop.transient(seq, item, why)
                    continue
                if kind == "ok":
                    loop.scored(seq, item, payload)
                else:
                    loop.transient(seq, item, payload)
    try:
        return _run(loop, body)
    finally:
        job_telemetry.JOB_IN_FLIGHT.set(0)
        if started_here:
            ray.shutdown()
