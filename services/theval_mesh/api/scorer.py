"""Scorer: one video at a time in this process, the models loaded once (the embedded engine)."""
import os
from pathlib import Path
from typing import Any

from theval_mesh.api.arguments import run_settings
from theval_mesh.backends.inference.plan import check_options
from theval_mesh.backends.media.sources import BYTES_LABEL, local_video
from theval_mesh.core.engine import Engine
from theval_mesh.core.results import VideoResult
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.inference import InferenceOptions
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc.config import OPTIONS

_BYTES_OPTION = next(o for o in OPTIONS if o.dest == "max_video_bytes")


def bytes_limit() -> int:
    """The largest video the evaluator takes as bytes: THEVAL_MAX_VIDEO_BYTES, else its default."""
    text = os.environ.get(_BYTES_OPTION.env)
    try:
        return int(text) if text else _BYTES_OPTION.default
    except ValueError:
        raise UserError(f"{_BYTES_OPTION.env}={text!r} is not a whole number of bytes") from None


class Scorer:
    """Scores single videos with the in-process models, loaded once here.

    Run settings: `settings`, or its fields as keywords (profile="paper", quality="proxy", ...).
    weights_store: the quality models' weights folder (default $THEVAL_WEIGHTS). runtime, device,
    precision: how the networks run, as evaluate() takes them. A video that cannot
    be scored gives a result with status "failed" and its reason, as in evaluate()'s results.
    """

    def __init__(self, settings: RunSettings | None = None, *, weights_store: str | None = None,
                 max_video_bytes: int | None = None, runtime: str = "auto", device: str = "auto",
                 precision: str = "fp32", **options: Any):
        self.settings = run_settings(settings, options)
        inference = InferenceOptions(runtime, device, precision)
        check_options(inference)
        self.engine = Engine(self.settings, weights_store, inference)
        # score_bytes() takes what the mesh's evaluator takes, no more.
        self.max_video_bytes = max_video_bytes or bytes_limit()

    @property
    def provenance(self) -> dict:
        """The profile, backends, models and weights checksums behind every result."""
        return self.engine.provenance()

    def score(self, path: str | Path, model: str = "") -> VideoResult:
        """The raw metrics of one video file; `model` labels the result."""
        return self.engine.score_video(str(path), model)

    def score_bytes(self, data: bytes, name: str = BYTES_LABEL, model: str = "") -> VideoResult:
        """The raw metrics of a video given as its file's bytes, labelled `name`. Empty bytes are a
        VideoError, more than max_video_bytes an InputTooLarge, as the evaluator refuses them."""
        with local_video(None, data, (), self.max_video_bytes) as path:
            result = self.engine.score_video(path, model)
        # The decoder read a temporary file whose name means nothing to the caller.
        result.video = name
        result.reason = result.reason and result.reason.replace(path, name)
        result.warnings = [w.replace(path, name) for w in result.warnings]
        return result
