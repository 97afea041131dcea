"""GT reference sets as the evaluator serves them: creating one from files and folders, the rules
of a video scored against one, its normalised scores, the leaderboard of the models scored
against one. Plain Python values: the servicer (service/evaluator.py) converts the messages, maps
the errors to status codes, and passes in how a video is scored (through the mesh)."""
import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.backends.media.sources import BYTES_LABEL, resolve_uri
from theval_mesh.core import aggregate
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.jobs.inputs import VIDEO_SUFFIXES, videos_in
from theval_mesh.jobs.reference_store import Reference, ReferenceStore
from theval_mesh.pure.errors import AccessDenied, AlreadyExists, NotFound, UserError, VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.scoring.final_score import Leaderboard, RawRow, ScoredRow, leaderboard
from theval_mesh.pure.scoring.names import KEY_OF, NAME_OF_KEY
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc.security import check_name

log = logging.getLogger("theval.evaluator")
MAX_LABEL = 1024  # a video's display name


@dataclass(frozen=True)
class GtVideo:
    """A video of a GT set to score: the `given`-th video of the request as it came (a file, or
    its bytes), or, with a `uri`, a video found in a folder given (the `given`-th)."""
    label: str
    given: int
    uri: str | None = None


@dataclass(frozen=True)
class Scores:
    """A video's normalised scores against a reference set."""
    reference: str
    row: ScoredRow
    warnings: list


# How a video of a GT set is scored: (its result, None), or (its failed result, its VideoError);
# the mesh's own failures raise.
Scorer = Callable[[GtVideo], tuple[VideoResult, Exception | None]]


class ReferenceSets:
    def __init__(self, store: ReferenceStore, roots, default: RunSettings, limits: Limits):
        """roots: the folders the server may read; default: its run settings."""
        self.store, self.roots, self.default, self.limits = store, roots, default, limits

    def get(self, name: str) -> Reference | None:
        """The set named `name`, None for no name; NotFound names the stored ones."""
        if not name:
            return None
        ref = self.store.get(name)
        if ref is None:
            known = ", ".join(r.name for r in self.store.all()) or "none yet; create one with CreateReference"
            raise NotFound(f"no GT reference set named {name!r} (stored: {known})")
        return ref

    def all(self) -> list[Reference]:
        return self.store.all()

    # ------------------------------------------------------------------ a video scored against a set
    def check_evaluate(self, reference: str, model: str, label: str, who: str) -> Reference | None:
        """The reference set a video is to be scored against (None: raw metrics only), once the
        request keeps the rules: a model's rows are its first scorer's."""
        if model:
            check_name("model", model)
        if len(label) > MAX_LABEL or not label.isprintable():
            raise UserError(f"name: at most {MAX_LABEL} printable characters, not {len(label)}")
        ref = self.get(reference)
        if ref is not None and model == ref.name:
            raise UserError(f"model {model!r} has the name of the reference set; name it otherwise")
        if ref is not None and model and self.store.model_owner(ref.name, model) not in (None, who):
            raise AccessDenied(f"model {model!r} against {ref.name!r} was scored by another caller: "
                               "name yours otherwise")
        return ref

    def settings(self, reference: Reference | None, given: RunSettings | None) -> RunSettings:
        """The settings given, else the reference set's (a video is comparable to it only so),
        else the server's."""
        if given is not None:
            return given
        if reference is not None:
            return RunSettings.from_key(reference.settings, limits=self.limits)
        return self.default

    def record(self, reference: Reference, result: VideoResult, who: str) -> Scores:
        """The video's scores against the set (ScoringError when scored unlike its GT); a model's
        video is stored, durably, for the leaderboard."""
        label = result.model or "this video"
        values = {NAME_OF_KEY[k]: v for k, v in result.metrics.items()}
        board = leaderboard([reference.row(), RawRow(label, values, None, result.provenance)],
                            gt_name=reference.name)
        if result.model:
            self.store.add_scored(reference.name, result, who)  # durable before the answer
        return Scores(reference.name, board.row(label), board.warnings)

    # ------------------------------------------------------------------ creating a set
    def check_create(self, name: str, who: str, replace: bool) -> str:
        """The name of a set to create, checked: only its owner may replace a set."""
        check_name("reference set name", name)
        existing = self.store.get(name)
        if existing is not None and not replace:
            raise AlreadyExists(f"a reference set named {name!r} exists; set replace to score it again")
        if existing is not None and existing.owner != who:
            raise AccessDenied(f"the reference set {name!r} belongs to another caller: only it may replace it")
        return name

    def gt_videos(self, uris: list[str | None]) -> list[GtVideo]:
        """The videos of a GT set from those given (their URIs; None: sent as bytes): a folder
        stands for the videos under it (jobs.inputs.videos_in), a file for itself. A URI outside
        the server's roots is refused."""
        out = []
        for i, uri in enumerate(uris):
            if uri is None:
                out.append(GtVideo(f"{BYTES_LABEL} #{i}", i))
                continue
            path = Path(resolve_uri(uri, self.roots))
            if not path.is_dir():
                out.append(GtVideo(uri, i))  # a file that is not there fails when it is scored
                continue
            out += [GtVideo(str(f), i, str(f)) for f in videos_in(path)]
        if not out:
            raise UserError("no videos: give files, or folders holding "
                            f"{', '.join(VIDEO_SUFFIXES)} files, under the allowed roots")
        return out

    def create(self, name: str, who: str, settings: RunSettings, videos: list[GtVideo], score: Scorer,
               concurrency: int) -> Reference:
        """Scores the GT videos (`concurrency` at a time) and stores the set they make, replacing
        one of that name. Refused when no video scored, or when a metric is zero or NaN over all
        of them (nothing could be normalised by it)."""
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="reference") as pool:
            scored = list(pool.map(score, videos))
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
        return ref

    # ------------------------------------------------------------------ leaderboards
    def leaderboard(self, reference: str, weights: dict | None = None) -> Leaderboard:
        """The models scored against the set (Evaluate with a model), ranked; the GT row first."""
        ref = self.get(reference)
        if ref is None:
            raise UserError("name the reference set")
        results = self.store.scored(ref.name)
        models = sorted({r.model for r in results})
        return aggregate.ranked(results, [ref.name] + models, ref.name, weights, gt_row=ref.row())


def _nan_reasons(results, metrics) -> str:
    reasons = []
    for m in metrics:
        found = {r.nan_reasons.get(KEY_OF[m]) for r in results if r.status == OK} - {None}
        if found:
            reasons.append(f"{m}: {'; '.join(sorted(found))}")
    return ", ".join(reasons)
