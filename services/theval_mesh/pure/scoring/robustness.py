"""Each metric's noise floor: how far its normalised score moves when the GT videos are only
re-encoded (synth/reencode.py), i.e. scored as a "model" against themselves. A re-encode should not
matter, so its normalised score should be 1; 1 - score is what encoding alone does to the metric.
A gap between two models smaller than that cannot be told from a codec choice.

Pure: the scores of each re-encode (value and bootstrap interval) in, the table and floors out.
"""
import math
from dataclasses import dataclass

FINAL = "Final score"
# The re-encodes (synth/reencode.py): the other video codec, the other audio codec, CRF -5 / +5, the
# other frame rate, half or double the resolution.
KINDS = ("video-codec", "audio-codec", "crf-5", "crf+5", "fps", "resolution")


@dataclass(frozen=True)
class Change:
    kind: str      # synth.reencode KINDS
    what: str      # e.g. "h264 -> H.265"
    metric: str    # a THEval metric, a group or FINAL
    change: float  # score - 1: how far from "like the GT" the re-encode lands (<= 0 for a normalised score)
    low: float     # its interval, the same shift of the score's interval
    high: float


def changes(kind: str, what: str, scores: dict[str, tuple[float, tuple[float, float] | None]]) -> list[Change]:
    """scores: metric -> (normalised score, (low, high) or None) of one re-encode against the originals."""
    out = []
    for metric, (value, ci) in scores.items():
        low, high = ci if ci else (math.nan, math.nan)
        out.append(Change(kind, what, metric, value - 1.0, low - 1.0, high - 1.0))
    return out


def noise_floors(table: list[Change]) -> dict[str, tuple[float, str]]:
    """metric -> (floor, kind): the largest |change| over the re-encodes, and which one it was."""
    floors: dict[str, tuple[float, str]] = {}
    for c in table:
        if math.isnan(c.change):
            continue
        if abs(c.change) > floors.get(c.metric, (-1.0, ""))[0]:
            floors[c.metric] = (abs(c.change), c.kind)
    return floors


def below_floor(ranked: list[tuple[str, float]], floor: float, kind: str) -> list[str]:
    """ranked: (model, Final score) best first. A note for each pair of adjacent ranks whose gap is
    under the Final score's noise floor."""
    notes = []
    for (better, a), (worse, b) in zip(ranked, ranked[1:]):
        gap = a - b
        if not math.isnan(gap) and gap < floor:
            notes.append(f"{better} and {worse}: Final-score gap {gap:.4f} is below the noise floor {floor:.4f} "
                         f"(re-encoding the GT alone, {kind}, moves the Final score that much): not a ranking")
    return notes
