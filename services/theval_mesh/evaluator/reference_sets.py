"""GT reference sets as the evaluator serves them: creating one from files and folders, the rules
of a video scored against one, its normalised scores, the leaderboard of the models scored
against one. Plain Python values: the servicer (evaluator/servicer.py) converts the messages, maps
the errors to status codes, and passes in how a video is scored (through the mesh).

Tenants: each caller (a token's identity; one anonymous caller on a server without tokens) has its
own namespace of sets. It creates, scores against and reads only its own; the models scored
against a set are rows of that set, its owner's. An admin may also list and read (not score
against, not replace) every owner's sets, naming the owner. A set of another owner is not found
exactly as a set that does not exist is, and no error lists names."""
import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.media.sources import BYTES_LABEL, resolve_uri
from theval_mesh.core import aggregate
from theval_mesh.core.inputs import VIDEO_SUFFIXES, Item, videos_in
from theval_mesh.core.preflight import check_gt, refuse_unnormalisable
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.pure.cache_key import identity
from theval_mesh.pure.errors import AccessDenied, AlreadyExists, NotFound, UserError, VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.scoring.errors import ScoringError
from theval_mesh.pure.scoring.final_score import Leaderboard, RawRow, ScoredRow, leaderboard
from theval_mesh.pure.scoring.names import KEY_OF, NAME_OF_KEY
from theval_mesh.pure.settings import RunSettings
from theval_mesh.pure.user_names import MAX_NAME, check_name
from theval_mesh.rpc.security import ANONYMOUS
from theval_mesh.stores.reference_store import Reference, ReferenceStore

log = logging.getLogger("theval.evaluator")
MAX_LABEL = 1024  # a video's display name


@dataclass(frozen=True)
class GtVideo:
    """A video of a GT set to score: the `given`-th video of the request as it came (a file, or
    its bytes), or, with a `uri`, a video found in a folder given (the `given`-th)."""
    label: str
    given: int
    uri: str | None = None
    local: str | None = None  # the file on this server, when it is one (its header is checked first)


@dataclass(frozen=True)
class VideoScores:
    """A video's normalised scores against a reference set."""
    reference: str
    row: ScoredRow
    warnings: list


# How a video of a GT set is scored: (its result, None), or (its failed result, its VideoError);
# the mesh's own failures raise.
GtScorer = Callable[[GtVideo], tuple[VideoResult, Exception | None]]


class ReferenceSets:
    def __init__(self, store: ReferenceStore, roots, default: RunSettings, limits: Limits):
        """roots: the folders the server may read; default: its run settings."""
        self.store, self.roots, self.default, self.limits = store, roots, default, limits

    def get(self, owner: str, name: str) -> Reference | None:
        """The set `name` of `owner`, None for no name; NotFound else, the same whoever else has a
        set of that name."""
        if not name:
            return None
        ref = self.store.get(owner, name)
        if ref is None:
            raise NotFound(f"no GT reference set named {name[:MAX_NAME]!r}{_of(owner)}: ListReferences lists "
                           "yours, CreateReference makes one")
        return ref

    def listed(self, who: str, admin: bool, every_owner: bool) -> list[Reference]:
        """The caller's sets; with every_owner, every owner's (admins only)."""
        if every_owner:
            _admin_only(admin)
            return self.store.all(None)
        return self.store.all(who)

    def owner_read(self, who: str, admin: bool, owner: str | None) -> str:
        """Whose sets a caller reads: its own (owner None, or itself), another's only as an admin."""
        if owner is not None and owner != who:
            _admin_only(admin)
            return owner
        return who

    # ------------------------------------------------------------------ a video scored against a set
    def check_evaluate(self, reference: str, model: str, label: str, who: str) -> Reference | None:
        """The reference set a video is to be scored against (None: raw metrics only), once the
        request keeps the rules: a caller scores against its own sets only."""
        if model:
            check_name("model", model)
        if len(label) > MAX_LABEL or not label.isprintable():
            raise UserError(f"name: at most {MAX_LABEL} printable characters, not {len(label)}")
        ref = self.get(who, reference)
        if ref is not None and model == ref.name:
            raise UserError(f"model {model!r} has the name of the reference set; name it otherwise")
        return ref

    def settings(self, reference: Reference | None, given: RunSettings | None) -> RunSettings:
        """The settings given, else the reference set's (a video is comparable to it only so),
        else the server's."""
        if given is not None:
            return given
        if reference is not None:
            return RunSettings.from_key(reference.settings, limits=self.limits)
        return self.default

    def record(self, reference: Reference, result: VideoResult) -> VideoScores:
        """The video's scores against the set (ScoringError when scored unlike its GT); a model's
        video is stored, durably, for the leaderboard: a row of the set, its owner's."""
        label = result.model or "this video"
        values = {NAME_OF_KEY[k]: v for k, v in result.metrics.items()}
        board = leaderboard([reference.row(), RawRow(label, values, None, result.provenance)],
                            gt_name=reference.name)
        if result.model:
            self.store.add_scored(reference.owner, reference.name, result)  # durable before the answer
        return VideoScores(reference.name, board.row(label), board.warnings)

    # ------------------------------------------------------------------ creating a set
    def check_create(self, name: str, who: str, replace: bool) -> str:
        """The name of a set to create in the caller's namespace, checked."""
        check_name("reference set name", name)
        if self.store.get(who, name) is not None and not replace:
            raise AlreadyExists(f"you have a reference set named {name!r}; set replace to score it again")
        return name

    def gt_videos(self, uris: list[str | None]) -> list[GtVideo]:
        """The videos of a GT set from those given (their URIs; None: sent as bytes): a folder
        stands for the videos under it (core.inputs.videos_in), a file for itself. A URI outside
        the server's roots is refused."""
        out = []
        for i, uri in enumerate(uris):
            if uri is None:
                out.append(GtVideo(f"{BYTES_LABEL} #{i}", i))
                continue
            path = Path(resolve_uri(uri, self.roots))
            if not path.is_dir():
                out.append(GtVideo(uri, i, local=str(path)))  # a file that is not there fails when it is scored
                continue
            out += [GtVideo(str(f), i, str(f), str(f)) for f in videos_in(path)]
        if not out:
            raise UserError("no videos: give files, or folders holding "
                            f"{', '.join(VIDEO_SUFFIXES)} files, under the allowed roots")
        return out

    def gt_results(self, owner: str, settings: RunSettings, provenance: dict, gt: str,
                   videos: list[str]) -> list[VideoResult]:
        """The results of these GT videos (files) that `owner`'s reference sets hold: the same
        bytes, scored OK with the same settings and backends. As `gt`'s (a job's GT name)."""
        out, wanted = [], identity(provenance)
        for video in videos:
            digest = sha256_file(video)
            for ref, result in self.store.gt_scored(owner, video, digest):
                # the backends as the result cache compares them (pure.cache_key): not where they ran
                if result.status == OK and ref.settings == settings.key() and identity(result.provenance) == wanted:
                    result.model, result.reused = gt, True
                    out.append(result)
                    break
        return out

    def create(self, name: str, who: str, settings: RunSettings, videos: list[GtVideo], score: GtScorer,
               concurrency: int, digests: dict | None = None) -> Reference:
        """Scores the GT videos (`concurrency` at a time) and stores the set they make, replacing
        one of that name. Refused when no video scored, or when a metric is zero or NaN over all
        of them (nothing could be normalised by it)."""
        # What the headers tell (no GT video with an audio track) is refused before any scoring.
        refuse_unnormalisable(check_gt([Item(name, v.local) for v in videos if v.local], self.limits), name,
                              partial=False)
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
        if bad:  # FAILED_PRECONDITION: the videos were scored, the set cannot be formed from them
            why = _nan_reasons(results, bad)
            raise ScoringError(f"GT set {name!r} cannot normalise {', '.join(bad)} (zero or NaN over all its "
                            f"videos{': ' + why if why else ''}); add videos that have it")
        ref = Reference(name=name, settings=settings.key(), provenance=row.provenance, raw=row.values,
                        counts=row.counts, videos=len(results), scored=len(results) - len(failures),
                        failures=failures, owner=who)
        self.store.put(ref, results, digests)
        log.info("reference set %r stored: %d videos scored, %d failed", name, ref.scored, len(failures))
        return ref

    # ------------------------------------------------------------------ leaderboards
    def leaderboard(self, owner: str, reference: str, weights: dict | None = None) -> Leaderboard:
        """The models scored against the set `reference` of `owner` (Evaluate with a model), ranked;
        the GT row first."""
        ref = self.get(owner, reference)
        if ref is None:
            raise UserError("name the reference set")
        results = self.store.scored(ref.owner, ref.name)
        models = sorted({r.model for r in results})
        return aggregate.ranked(results, [ref.name] + models, ref.name, weights, gt_row=ref.row())


def _of(owner: str) -> str:
    return "" if owner == ANONYMOUS else f" of owner {owner[:MAX_NAME]!r}"


def _admin_only(admin: bool):
    """Other owners' sets are an admin's to read; refused to others whether or not any exist."""
    if not admin:
        raise AccessDenied("only an admin reads other owners' reference sets (the server's --admins, or "
                           "THEVAL_ADMINS): leave the owner out to read yours")


def _nan_reasons(results, metrics) -> str:
    reasons = []
    for m in metrics:
        found = {r.nan_reasons.get(KEY_OF[m]) for r in results if r.status == OK} - {None}
        if found:
            reasons.append(f"{m}: {'; '.join(sorted(found))}")
    return ", ".join(reasons)
