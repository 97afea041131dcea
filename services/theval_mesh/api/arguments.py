"""What the API's calls take: run settings as a RunSettings or its fields as keywords; the
models' videos as {name: path} or [(name, path), ...]."""
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from theval_mesh.pure.errors import UsageRefused
from theval_mesh.pure.settings import RunSettings

Models = Mapping[str, str | Path] | Iterable[tuple[str, str | Path]]


def run_settings(settings: RunSettings | None, options: dict[str, Any]) -> RunSettings:
    """`settings`, or RunSettings(**options) (profile="paper", quality="proxy", ...); a bad value
    is a UserError naming it, an unknown option a TypeError."""
    if settings is not None:
        if options:
            raise TypeError(f"give settings= or the options {', '.join(options)}, not both")
        return settings
    try:
        return RunSettings(**options)
    except ValueError as err:
        raise UsageRefused(str(err)) from None


def model_pairs(models: Models) -> list[tuple[str, str]]:
    return [(str(name), str(path)) for name, path in (models.items() if isinstance(models, Mapping) else models)]
