"""Is a GT set comparable with a model's results? Only when both were scored the same way.

A provenance is the dict every stored result carries (docs/metrics.md, "Provenance"). The fields that
determine metric values and are compared here:

    {"profile": "reference",
     "landmarks": "mediapipe==0.10.21",          # any JSON value: string or dict
     "headpose": "facemesh-rigid-fit",
     "vad": "silero-vad 5.1 silero_vad.onnx",
     "quality": {"Global aesthetic": "topiq_iaa sha256:ab12...",   # canonical name or machine key
                 "Mouth quality": "proxy:piqe", ...}}

Tool version and timing fields are ignored, wherever they appear.
"""
from theval_mesh.pure.inference import precision_label
from theval_mesh.pure.metrics.registry import QUALITY
from theval_mesh.pure.scoring.errors import IncompatibleBackends
from theval_mesh.pure.scoring.names import GROUPS, METRICS, canonical_metric

COMPARED = ("profile", "landmarks", "headpose", "vad", "audio", "frames", "normalise_translation")
# How the networks ran (core.provenance.inference): the runtime and device never change an fp32
# number beyond float rounding, so they are not compared; the precision is.
INFERENCE = "inference"
# A run's provenance lists why its numbers cannot be compared with the published GT (empty: they
# can, up to the backends no local run reproduces by name); written by core.provenance.
PUBLISHED_BLOCKERS = "published_gt_blockers"
# Fields that never change a metric value (they may sit inside a backend's description too).
IGNORED_FIELDS = frozenset({
    "tool_version", "theval_version", "timing", "timings", "elapsed", "elapsed_s", "seconds",
    "started", "finished", "created", "duration_s",
})

# Provenance of the GT row shipped in data/published_gt_metrics.csv: the reference code's own
# backends (FaceXFormer, RetinaFace, ...), which no local run reproduces by name.
PUBLISHED_PROVENANCE = {
    "source": "published",
    "profile": "reference",
    "landmarks": "reference",
    "headpose": "reference",
    "vad": "reference",
    "quality": {m: "reference" for m in GROUPS[QUALITY]},
}

PUBLISHED_GT_WARNING = (
    "GT is the PUBLISHED THEval figures (reference code and backends, THEval dataset videos): the "
    "scores are meaningful only if the models were scored on the THEval dataset with the "
    "`reference` profile; head motion comes from another head-pose estimator than the "
    "reference's FaceXFormer; otherwise score your own GT videos with the same backends")


def is_published(provenance) -> bool:
    return bool(provenance) and provenance.get("source") == "published"


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in IGNORED_FIELDS}
    return value


def _show(value) -> str:
    return "(not recorded)" if value is None else repr(value)


def _quality(provenance) -> dict:
    given = provenance.get("quality") or {}
    return {canonical_metric(k) or k: _clean(v) for k, v in given.items()}


def differences(gt_provenance: dict, model_provenance: dict, model: str = "model") -> list[str]:
    """Every determining field on which the two provenances differ, as readable lines."""
    out = []
    for key in COMPARED:
        gt_value, model_value = _clean(gt_provenance.get(key)), _clean(model_provenance.get(key))
        if gt_value != model_value:
            out.append(f"{key}: GT {_show(gt_value)} vs {model} {_show(model_value)}")
    gt_precision = precision_label(gt_provenance.get(INFERENCE))
    model_precision = precision_label(model_provenance.get(INFERENCE))
    if gt_precision != model_precision:
        out.append(f"network precision (--precision): GT {gt_precision} vs {model} {model_precision}")
    gt_q, model_q = _quality(gt_provenance), _quality(model_provenance)
    extra = sorted((set(gt_q) | set(model_q)) - set(METRICS), key=str)
    for metric in [m for m in METRICS if m in gt_q or m in model_q] + extra:
        if gt_q.get(metric) != model_q.get(metric):
            out.append(f"quality model for {metric}: GT {_show(gt_q.get(metric))} "
                       f"vs {model} {_show(model_q.get(metric))}")
    return out


def check_compatible(gt_provenance: dict, model_provenance: dict, model: str = "model") -> list[str]:
    """Raise IncompatibleBackends listing every difference; return non-fatal warnings otherwise.

    Published GT (source "published") cannot match a local run's backends by name. It is allowed
    (with the warning the leaderboard carries) only for results scored as the reference code
    scores: the run's provenance lists what departs from it (profile, single pass, frame stride,
    translation normalisation, VAD model, audio extraction, quality proxies), and any of those is
    refused. Results without that list (older runs) are refused too.
    """
    if is_published(gt_provenance):
        if is_published(model_provenance):
            return []
        profile = model_provenance.get("profile")
        if profile != "reference":
            raise IncompatibleBackends(
                model, [f"profile: published GT 'reference' vs {model} {_show(profile)}"])
        blockers = model_provenance.get(PUBLISHED_BLOCKERS)
        if blockers is None:
            blockers = ["its provenance does not say how it departs from the reference code "
                        "(scored by an older version): score it again"]
        if blockers:
            raise IncompatibleBackends(model, [f"not comparable with the published GT: {b}" for b in blockers])
        return []
    found = differences(gt_provenance, model_provenance, model)
    if found:
        raise IncompatibleBackends(model, found)
    return []
