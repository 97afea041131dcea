"""Views of the metric registry (pure/metrics/registry.py) by name: the 8 canonical names, their
machine keys, the groups, and the column spellings accepted on input."""
import re

from theval_mesh.pure.metrics.registry import GROUP_NAMES, REGISTRY, in_group

METRICS = tuple(m.name for m in REGISTRY)  # in the column order of the reference code's CSV files
KEYS = tuple(m.key for m in REGISTRY)
KEY_OF = {m.name: m.key for m in REGISTRY}
NAME_OF_KEY = {m.key: m.name for m in REGISTRY}
GROUPS = {g: tuple(m.name for m in in_group(g)) for g in GROUP_NAMES}

FINAL = "Final score"


def _key(name) -> str:
    # Same normalisation as the reference code: case and punctuation do not matter.
    return re.sub(r"[^a-z0-9]+", " ", str(name).strip().lower()).strip()


ALIASES = {_key(spelling): m.name for m in REGISTRY for spelling in (m.name, m.key, *m.aliases)}


def canonical_metric(name) -> str | None:
    """Canonical metric name for a column name, machine key or alias; None if it is not a metric."""
    return ALIASES.get(_key(name))
