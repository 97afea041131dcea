"""The 8 THEval metric names, their machine keys, groups, and the column aliases accepted on input."""
import re

# Canonical names, in the column order of the reference code's CSV files.
METRICS = (
    "Global aesthetic",
    "Mouth quality",
    "Face quality",
    "Lip dynamics",
    "Head motion dynamics",
    "Eyebrow dynamics",
    "Silent lip stability",
    "Lip sync",
)

KEYS = (
    "global_aesthetic",
    "mouth_quality",
    "face_quality",
    "lip_dynamics",
    "head_motion",
    "eyebrow_dynamics",
    "silent_lip_stability",
    "lip_sync",
)

KEY_OF = dict(zip(METRICS, KEYS))
NAME_OF_KEY = dict(zip(KEYS, METRICS))

GROUPS = {
    "Quality": METRICS[0:3],
    "Naturalness": METRICS[3:6],
    "Synchronization": METRICS[6:8],
}

FINAL = "Final score"


def _key(name) -> str:
    # Same normalisation as the reference code: case and punctuation do not matter.
    return re.sub(r"[^a-z0-9]+", " ", str(name).strip().lower()).strip()


_ALIASES = {
    "global aesthetics": "Global aesthetic",
    "global aesthetic score": "Global aesthetic",
    "mouth quality score": "Mouth quality",
    "face quality score": "Face quality",
    "std over time": "Lip dynamics",
    "lip dynamics std": "Lip dynamics",
    "head motion": "Head motion dynamics",
    "head motion dynamic": "Head motion dynamics",
    "eyebrow": "Eyebrow dynamics",
    "eyebrow dynamics score": "Eyebrow dynamics",
    "micro expression intensity": "Eyebrow dynamics",
    "silent mad": "Silent lip stability",
    "silent lip": "Silent lip stability",
    "silence lip stability": "Silent lip stability",
    "mean difference": "Lip sync",
    "lip synchronization": "Lip sync",
    "lipsync": "Lip sync",
}

ALIASES = {_key(m): m for m in METRICS}
ALIASES.update({_key(key): name for name, key in KEY_OF.items()})
ALIASES.update({_key(alias): name for alias, name in _ALIASES.items()})


def canonical_metric(name) -> str | None:
    """Canonical metric name for a column name, machine key or alias; None if it is not a metric."""
    return ALIASES.get(_key(name))
