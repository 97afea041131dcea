"""Checks of a run's GT before any model loads, from the containers alone (no frame decoded): a
GT that cannot normalise a metric is known in a fraction of a second, not after an hour of scoring.

Only what the header tells is checked here: an audio stream. A face that is never found shows
only once the frames are decoded; then the per-video results are written and the leaderboard
is refused (outputs.results_files.write_results)."""
import time
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.inputs import VIDEO_SUFFIXES, Item
from theval_mesh.pure.errors import InputsRefused, UserError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.metrics.registry import NO_AUDIO, REGISTRY

AUDIO_METRICS = [m.name for m in REGISTRY if NO_AUDIO in m.nan_reasons]  # NaN on a video without audio


@dataclass(frozen=True)
class GtCheck:
    probed: int           # GT videos whose container was read
    readable: int
    with_audio: int
    left_out: list[str]   # metrics the GT cannot normalise, as far as the headers tell


def check_gt(gt_items: list[Item], limits: Limits = Limits()) -> GtCheck:
    """Read the GT videos' headers until one readable video with an audio track is found."""
    probed = readable = with_audio = 0
    for item in gt_items:
        if item.missing:
            continue
        probed += 1
        try:
            reader = MediaReader(item.video, limits)
        except UserError:  # unreadable: it fails on its own when scored
            continue
        try:
            readable += 1
            with_audio += reader.info.has_audio
        finally:
            reader.close()
        if with_audio:
            break
    return GtCheck(probed, readable, with_audio, [] if with_audio or not readable else list(AUDIO_METRICS))


def refuse_unnormalisable(check: GtCheck, gt_name: str, partial: bool) -> str | None:
    """InputsRefused when the GT cannot normalise a metric and no partial Final score was asked
    for; else the line to show when one will be formed (None: nothing to say)."""
    if not check.left_out:
        return None
    what = (f"none of the {check.readable} readable {gt_name} video(s) has an audio track, so "
            f"{' and '.join(check.left_out)} cannot be normalised")
    if not partial:
        raise InputsRefused(f"{what} and no Final score could be formed: add the audio to the {gt_name} videos, "
                            f"or score the other {len(REGISTRY) - len(check.left_out)} metrics with a partial "
                            "Final score (--partial-score; Python: partial_score=True)")
    return f"partial Final score: {what}; they are left out"


# ------------------------------------------------------------------ the inputs, before any work
PROBE_BUDGET_S = 2.0  # per input: stop looking for a readable video after this long (never refuse then)
SHOWN = 3  # unpaired names shown in a line


@dataclass(frozen=True)
class Pairing:
    """How a model's videos pair with the GT's by file name (a generated video is named after the
    GT video whose audio and identity it was made from)."""
    model: str
    videos: int
    paired: int
    unpaired: list[str]  # file names no GT video has, sorted

    def to_dict(self) -> dict:
        return {"videos": self.videos, "paired": self.paired, "unpaired": self.unpaired[:50]}


def pairing_of(model: str, videos: list[str], gt_videos: list[str]) -> Pairing:
    """`model`'s videos (paths) against the GT's, by file name."""
    gt = {Path(v).name for v in gt_videos}
    names = [Path(v).name for v in videos]
    unpaired = sorted(n for n in names if n not in gt)
    return Pairing(model, len(names), len(names) - len(unpaired), unpaired)


def _readable(items: list[Item], limits: Limits) -> tuple[bool, str | None]:
    """(whether a readable video was found or the search stopped early, the first reason one was not)."""
    first = None
    end = time.monotonic() + PROBE_BUDGET_S
    for item in items:
        if item.missing:
            first = first or f"{Path(item.video).name}: {item.missing}"
            continue
        try:
            MediaReader(item.video, limits).close()
            return True, None
        except UserError as err:
            first = first or getattr(err, "reason", str(err))
        if time.monotonic() > end:
            return True, first
    return False, first


def check_inputs(inputs: list[tuple[str, str]], items: list[Item], gt_name: str, limits: Limits = Limits(),
                 allow_unpaired: bool = False, flag: str = "--model") -> tuple[list[Pairing], list[str]]:
    """Refuse, before any model loads, an input with nothing to score or a model none of whose
    videos pairs with a GT video (InputsRefused, naming the input and the fix); returns each model's
    pairing and the lines to show (a partial pairing, or that only the GT is scored)."""
    by_input = {name: [i for i in items if i.model == name] for name, _ in inputs}
    for k, (name, path) in enumerate(inputs):
        ok, why = _readable(by_input[name], limits)
        if not ok:
            given = "--gt " if k == 0 else f"{flag} {name}="
            raise InputsRefused(f"{given}{path}: nothing to score ({why}): give a folder holding videos "
                                f"({', '.join(VIDEO_SUFFIXES)}), one video, or a .txt list of video paths")
    gt_videos = [i.video for i in by_input[gt_name] if not i.missing]
    gt_names = sorted({Path(v).name for v in gt_videos})
    pairings, lines = [], []
    for name, path in inputs[1:]:
        pairing = pairing_of(name, [i.video for i in by_input[name]], gt_videos)
        pairings.append(pairing)
        names, unpaired = pairing.videos, pairing.unpaired
        if not unpaired:
            continue
        example = f"e.g. {unpaired[0]!r}; the GT has {', '.join(map(repr, gt_names[:SHOWN]))}" + \
            (", ..." if len(gt_names) > SHOWN else "")
        if pairing.paired == 0 and not allow_unpaired:
            raise InputsRefused(f"{flag} {name}={path}: none of its {names} video(s) has the file name of a {gt_name} "
                                f"video ({example}): name each generated video after the {gt_name} video it was made "
                                "from, or score it unpaired with --allow-unpaired")
        lines.append(f"model {name}: {pairing.paired} of {names} video(s) pair with a {gt_name} video by file "
                     f"name; unpaired: {', '.join(unpaired[:SHOWN])}" + (", ..." if len(unpaired) > SHOWN else "")
                     + " (scored, and counted in its means; not in the paired comparisons)")
    if len(inputs) == 1:
        lines.append(f"no model given: only the {gt_name} videos are scored (add --model NAME=DIR to rank models "
                     "against them)")
    return pairings, lines


def before_work(inputs: list[tuple[str, str]], items: list[Item], gt_name: str, limits: Limits, partial: bool,
                allow_unpaired: bool, flag: str = "--model") -> list[str]:
    """Every check of a run's inputs before any model loads or Ray starts (check_inputs, then the
    GT's headers); InputsRefused on the first failed, else the lines to show."""
    _, lines = check_inputs(inputs, items, gt_name, limits, allow_unpaired, flag)
    notice = refuse_unnormalisable(check_gt([i for i in items if i.model == gt_name], limits), gt_name, partial)
    return lines + ([notice] if notice else [])
