"""The provenance every result carries: the profile and every backend behind its numbers.

One function for the embedded engine and the mesh evaluator, which learns the backends'
descriptions from the services themselves."""
from ..media.decode import DECODER
from ..version import VERSION
from .frame_pass import mesh_passes
from .settings import RunSettings


def describe(settings: RunSettings, landmarks: str, headpose: str, vad: str, quality: dict,
             vad_served_by: str = "in-process") -> dict:
    """landmarks, headpose, vad: backend descriptions; quality: QualityBackend.provenance().
    Where the neural models ran (in-process or a Triton server) is recorded, but it is not part of
    what GT and models must share: both paths compute the same numbers (a test proves it)."""
    s = settings
    lip_sync_input = "BGR frames (reference quirk)" if (s.exact_reference and s.profile == "reference") \
        else "RGB frames"
    return {
        "tool": f"theval-mesh {VERSION}",
        "profile": s.profile,
        # The passes change the values, so they are part of what GT and models must share.
        "landmarks": {"backend": landmarks,
                      "passes": sorted(mesh_passes(s)) + (["silent_lip"] if s.exact_reference else []),
                      "lip_sync_input": lip_sync_input},
        "headpose": headpose,
        "vad": vad,
        "quality": quality["quality"],  # metric -> model and weights checksum, or proxy:<name>
        "quality_mode": quality["mode"],
        "quality_weights": quality.get("weights") or quality.get("proxy_definition"),
        "served_by": {"quality": quality.get("served_by", "in-process"), "vad": vad_served_by},
        "decoder": DECODER,
        "frames": "all" if s.frame_stride == 1 else f"every {s.frame_stride}th",
    }
