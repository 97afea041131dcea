"""The 8 THEval metrics: one entry each, in the column order of the reference code's CSV files
(data/published_*.csv). This is the only place a metric's key, name, group or NaN reasons are
spelled: computing, scoring, outputs and services iterate REGISTRY or name an entry below.
"""
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from theval_mesh.pure.metrics.eyebrow import eyebrow_dynamics
from theval_mesh.pure.metrics.head_motion import head_motion
from theval_mesh.pure.metrics.lip_dynamics import lip_dynamics
from theval_mesh.pure.metrics.lip_sync import MIN_SPEECH_RATIO, lip_sync
from theval_mesh.pure.metrics.quality import mean_score
from theval_mesh.pure.metrics.silent_lip import silent_lip_stability
from theval_mesh.pure.metrics.speech_frames import MIN_SILENCE_RUN_S

QUALITY, NATURALNESS, SYNCHRONIZATION = "Quality", "Naturalness", "Synchronization"

# Direction: which way the RAW value reads (the section headings of docs/metrics.md). It documents the
# metric and changes no score: the Final score normalises every metric by its closeness to GT,
# s = 1 - |x - g| / |g|, so a quality above GT's or a lip-sync error below GT's loses too.
HIGHER = "higher is better"     # a quality model's rating
CLOSER = "closer to GT"         # a motion measure: too little and too much both lose
LOWER = "lower is better"       # an error (lip-sync: the gap between mouth and loudness)

# The conditions a metric's NaN reasons are keyed by; EMPTY: its function found too little to
# measure. A reason's {fields} are filled in by Metric.reason.
EMPTY, SHORT, NO_AUDIO, NO_SILENCE, LITTLE_SPEECH = "empty", "short", "no audio", "no silence", "little speech"
# A std (or a variance of differences) over one or two samples is not a motion measure: `paper`
# gives the Naturalness metrics NaN under this many frames with a face (`reference` a warning).
MIN_DYNAMIC_FRAMES = 3
TOO_FEW_FRAMES = f"needs at least {MIN_DYNAMIC_FRAMES} frames, the video has {{frames}} with a face"
NO_AUDIO_TRACK = "no audio track"  # or the audio track's own problem (AudioSeries.problem)


@dataclass(frozen=True, eq=False)  # identity: one entry per metric, usable as a dict key
class Metric:
    key: str         # machine key: results.csv/JSON columns, gRPC maps, "metric:<key>" timings
    name: str        # display name: the reference CSV column, leaderboards, weights
    short: str       # column header of the terminal leaderboard
    group: str
    direction: str   # HIGHER, CLOSER or LOWER (see above)
    aliases: tuple[str, ...]  # other column names accepted on input (case and punctuation ignored)
    function: Callable[..., float]  # computes the raw value (quality: from the model's per-frame scores)
    nan_reasons: Mapping[str, str]  # condition -> the reason a NaN value carries

    def reason(self, condition: str, **fields) -> str:
        return self.nan_reasons[condition].format(**fields)


GLOBAL_AESTHETIC = Metric(
    "global_aesthetic", "Global aesthetic", "Aesth", QUALITY, HIGHER,
    ("global aesthetics", "global aesthetic score"),
    mean_score, {EMPTY: "no frames scored"})
MOUTH_QUALITY = Metric(
    "mouth_quality", "Mouth quality", "Mouth", QUALITY, HIGHER,
    ("mouth quality score",),
    mean_score, {EMPTY: "no face found"})
FACE_QUALITY = Metric(
    "face_quality", "Face quality", "Face", QUALITY, HIGHER,
    ("face quality score",),
    mean_score, {EMPTY: "no face found"})
LIP_DYNAMICS = Metric(
    "lip_dynamics", "Lip dynamics", "LipDyn", NATURALNESS, CLOSER,
    ("std over time", "lip dynamics std"),
    lip_dynamics, {EMPTY: "fewer than 2 frames with a face", SHORT: TOO_FEW_FRAMES})
HEAD_MOTION = Metric(
    "head_motion", "Head motion dynamics", "Head", NATURALNESS, CLOSER,
    ("head motion", "head motion dynamic"),
    head_motion, {EMPTY: "no face found", SHORT: TOO_FEW_FRAMES})
EYEBROW_DYNAMICS = Metric(
    "eyebrow_dynamics", "Eyebrow dynamics", "Brow", NATURALNESS, CLOSER,
    ("eyebrow", "eyebrow dynamics score", "micro expression intensity"),
    eyebrow_dynamics, {EMPTY: "fewer than 2 frames with a face", SHORT: TOO_FEW_FRAMES})
SILENT_LIP_STABILITY = Metric(
    "silent_lip_stability", "Silent lip stability", "Silent", SYNCHRONIZATION, CLOSER,
    ("silent mad", "silent lip", "silence lip stability"),
    silent_lip_stability, {NO_AUDIO: NO_AUDIO_TRACK,
                           NO_SILENCE: f"no silence of at least {MIN_SILENCE_RUN_S:g} s",
                           EMPTY: "fewer than 2 silent frames with a face"})
LIP_SYNC = Metric(
    "lip_sync", "Lip sync", "LipSync", SYNCHRONIZATION, LOWER,
    ("mean difference", "lip synchronization", "lipsync"),
    lip_sync, {NO_AUDIO: NO_AUDIO_TRACK,
               LITTLE_SPEECH: f"speech covers {{ratio:.0%}} of the frames (under {MIN_SPEECH_RATIO:.0%})",
               EMPTY: "fewer than 2 speech frames with a face"})

REGISTRY = (GLOBAL_AESTHETIC, MOUTH_QUALITY, FACE_QUALITY, LIP_DYNAMICS, HEAD_MOTION, EYEBROW_DYNAMICS,
            SILENT_LIP_STABILITY, LIP_SYNC)
GROUP_NAMES = tuple(dict.fromkeys(m.group for m in REGISTRY))  # in registry order


def in_group(group: str) -> tuple[Metric, ...]:
    return tuple(m for m in REGISTRY if m.group == group)


def markdown_table() -> str:
    """The metric table of docs/metrics.md (tests/unit/test_registry.py keeps the two equal)."""
    def template(text):  # "{ratio:.0%}" -> "[ratio]"
        return re.sub(r"\{(\w+)[^}]*\}", r"[\1]", text)
    lines = ["| # | Metric (CSV column) | Key | Group | Raw value | Also read as | Computed by | NaN reasons |",
             "|---:|---|---|---|---|---|---|---|"]
    for i, m in enumerate(REGISTRY, start=1):
        function = f"`{m.function.__module__.rsplit('.', 1)[-1]}.{m.function.__name__}`"
        cells = [str(i), m.name, f"`{m.key}`", m.group, m.direction, ", ".join(m.aliases), function,
                 "; ".join(template(r) for r in m.nan_reasons.values())]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
