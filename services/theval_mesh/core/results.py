"""The record of one scored (or failed) video."""
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import PurePath

from theval_mesh.pure.scoring.names import KEYS

OK, FAILED = "ok", "failed"


def in_metric_order(d: dict) -> dict:
    """A per-metric dict in the engine's order (the CSV writers iterate them), whatever order
    JSON or protobuf gave it back in."""
    return {k: d[k] for k in sorted(d, key=lambda k: (KEYS.index(k) if k in KEYS else len(KEYS), k))}


def json_safe(value):
    """NaN as null, at any depth (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


@dataclass
class VideoResult:
    model: str
    video: str
    status: str
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    nan_reasons: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    frames_total: int = 0
    frames_used: int = 0
    face_frames: int = 0
    fps: float = 0.0
    width: int = 0
    height: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # stage or "metric:<key>" -> seconds
    # Beyond THEval: the audio's offset from the picture, {ms, confidence, peak, frames}
    # (pure.metrics.av_offset); empty when there was too little speech with a face.
    av_offset: dict[str, float] = field(default_factory=dict)
    # The signals over time the report plots (core.trace); NaN where a frame has no face.
    trace: dict[str, list[float]] = field(default_factory=dict)
    # Beyond THEval: the quality and motion metrics per 5 s window of a video longer than two
    # windows, with intervals and drift flags (core.drift); empty for shorter videos.
    drift: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    # True when this result was not scored by this run but reused from the result cache
    # (stores.result_cache): the same bytes, settings and backends; `seconds` is the first run's.
    reused: bool = False

    def __repr__(self) -> str:
        """Short, for a notebook: the model, the video's file name, the status (and reason), the
        8 metrics rounded, the frames used; the series and other big fields are left out (all of
        it: to_dict())."""
        metrics = ", ".join(f"{k}={v:.4g}" if isinstance(v, (int, float)) else f"{k}={v!r}"
                            for k, v in self.metrics.items())
        reason = self.reason if self.reason is None or len(self.reason) <= 80 else self.reason[:77] + "..."
        return (f"VideoResult(model={self.model!r}, video={PurePath(self.video).name!r}, status={self.status!r}"
                + (f", reason={reason!r}" if reason else "")
                + f", metrics={{{metrics}}}, frames={self.frames_used}/{self.frames_total})")

    def to_dict(self) -> dict:
        """Every field as plain Python values (a deep copy, NaN kept); to_json() is it as JSON,
        NaN as null."""
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(json_safe(asdict(self)), sort_keys=True, allow_nan=False)

    @classmethod
    def from_json(cls, line: str) -> "VideoResult":
        d = json.loads(line)
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}  # results.jsonl adds scores
        d["metrics"] = {k: (math.nan if v is None else v) for k, v in d["metrics"].items()}
        d["trace"] = {k: [math.nan if v is None else v for v in vs] for k, vs in d.get("trace", {}).items()}
        for key in ("metrics", "nan_reasons", "counts"):
            d[key] = in_metric_order(d[key])
        return cls(**d)
