"""The key of a cached per-video result: what the video is (its bytes' sha256), how it was scored
(the run settings) and by what (every backend's identity: model checksums, FaceMesh passes, VAD
model, decoder, audio extraction and the tool's version, as the provenance names them).

Where a model ran (in-process or on a Triton server; on which runtime and device) is left out: all
compute the same fp32 numbers (tests prove it), so a result scored by the mesh serves an embedded
run and back, and one scored on torch serves an OpenVINO run. The precision stays in."""
import hashlib
import json

from theval_mesh.pure.inference import precision_label

KEY_VERSION = 1  # bump when what a cached result holds changes meaning
# Where the models ran, and what a video's own scoring adds (its frame counts, core.stages).
NOT_IDENTITY = ("served_by", "frame_counts")
INFERENCE = "inference"  # runtimes, devices and precision of the networks: the precision alone is identity


def identity(provenance: dict) -> dict:
    """The part of a result's provenance that decides its values."""
    out = {k: v for k, v in provenance.items() if k not in NOT_IDENTITY}
    if out.get(INFERENCE) is not None:
        out[INFERENCE] = precision_label(out[INFERENCE])
    return out


def cache_key(video_sha256: str, settings: dict, provenance: dict) -> str:
    """sha256 over the video's digest, the settings and the backends' identity, canonical JSON."""
    text = json.dumps({"v": KEY_VERSION, "video": video_sha256, "settings": settings,
                       "identity": identity(provenance)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
