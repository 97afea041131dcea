"""Checks of a run's GT before any model loads, from the containers alone (no frame decoded): a
GT that cannot normalise a metric is known in a fraction of a second, not after an hour of scoring.

Only what the header tells is checked here: an audio stream. A face that is never found shows
only once the frames are decoded; then the per-video results are written and the leaderboard
is refused (outputs.results_files.write_results)."""
from dataclasses import dataclass

from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.core.inputs import Item
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
