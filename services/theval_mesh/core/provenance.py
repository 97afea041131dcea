"""The provenance every result carries: the profile and every backend behind its numbers.

One function for the embedded engine and the mesh evaluator, which learns the backends'
descriptions from the services themselves."""
from theval_mesh.backends.audio.model import REFERENCE_VAD
from theval_mesh.backends.headpose.backend import BACKEND as HEADPOSE_BACKEND
from theval_mesh.backends.headpose.backend import RIGID_FIT as HEADPOSE_RIGID_FIT
from theval_mesh.backends.media.audio import EXTRACTION
from theval_mesh.backends.media.decode import DECODER
from theval_mesh.core.frame_pass import mesh_passes
from theval_mesh.pure.inference import FP32, precision_label
from theval_mesh.pure.scoring.compat import INFERENCE, PUBLISHED_BLOCKERS
from theval_mesh.pure.settings import RunSettings
from theval_mesh.pure.version import VERSION


def describe(settings: RunSettings, landmarks: str, headpose: str, vad: str, quality: dict,
             vad_served_by: str = "in-process", headpose_served_by: str = "in-process",
             headpose_inference: dict | None = None) -> dict:
    """landmarks, headpose, vad: backend descriptions; quality: QualityBackend.provenance();
    headpose_inference: FaceXFormerHeadPose.inference() (None: no network).
    Where the neural models ran (in-process or a Triton server; which runtime, which device) is
    recorded, but it is not part of what GT and models must share: every path computes the same
    fp32 numbers (tests prove it). Their precision is: see inference()."""
    s = settings
    lip_sync_input = "BGR frames (reference quirk)" if (not s.single_pass and s.profile == "reference") \
        else "RGB frames"
    networks = inference(quality.get("inference"), headpose_inference)
    return {
        PUBLISHED_BLOCKERS: published_gt_blockers(s, vad, quality, headpose, networks),
        "tool": f"theval-mesh {VERSION}",
        "profile": s.profile,
        # The passes change the values, so they are part of what GT and models must share.
        "landmarks": {"backend": landmarks,
                      "passes": sorted(mesh_passes(s)) + ([] if s.single_pass else ["silent_lip"]),
                      "lip_sync_input": lip_sync_input},
        "headpose": headpose,
        "vad": vad,
        "quality": quality["quality"],  # metric -> model and weights checksum, or proxy:<name>
        "quality_mode": quality["mode"],
        "quality_weights": quality.get("weights") or quality.get("proxy_definition"),
        "served_by": {"quality": quality.get("served_by", "in-process"), "vad": vad_served_by,
                      "headpose": headpose_served_by},
        INFERENCE: networks,
        "decoder": DECODER,
        "audio": EXTRACTION[s.profile],
        "frames": "all" if s.frame_stride == 1 else f"every {s.frame_stride}th",
        "normalise_translation": s.normalise_translation,
    }


def inference(*parts) -> dict | None:
    """How the networks ran, from the quality and head-pose backends' own accounts:
    {"precision", "devices": {part: device}, "runtimes": {network: "runtime version"}}; None when
    no network ran (proxy quality, rigid-fit head pose). One precision for a whole result: the
    backends of one run share its options."""
    parts = [p for p in parts if p]
    if not parts:
        return None
    precisions = sorted({str(p.get("precision") or FP32) for p in parts})
    return {"precision": "+".join(precisions),
            "devices": sorted({str(p.get("device")) for p in parts}),
            "runtimes": {k: v for p in parts for k, v in (p.get("runtimes") or {}).items()}}


def in_process(settings: RunSettings, quality, headpose, vad: str) -> dict:
    """The provenance of the in-process backends: quality a QualityBackend, headpose a
    FaceXFormerHeadPose or None (the rigid fit), vad the VAD's description."""
    from theval_mesh.backends.landmarks.name import BACKEND as LANDMARKS
    return describe(settings, LANDMARKS, headpose.describe() if headpose else HEADPOSE_BACKEND, vad,
                    quality.provenance(), headpose_served_by=headpose.served_by if headpose else "in-process",
                    headpose_inference=headpose.inference() if headpose else None)


def expected(settings: RunSettings, weights_store=None, inference_options=None) -> dict:
    """What core.engine.Engine(settings, weights_store, inference_options).provenance() gives,
    without importing torch or MediaPipe for the default backends: the result cache's key before
    anything is scored. (Paper quality checksums its models, so it loads them; FaceXFormer
    describes its files.)"""
    from theval_mesh.backends.audio.model import vad_provenance
    from theval_mesh.backends.headpose import facexformer
    from theval_mesh.backends.quality.backend import QualityBackend
    quality = QualityBackend(mode=settings.quality, profile=settings.profile, store=weights_store,
                             inference=inference_options)
    use_facexformer, _ = facexformer.choose(settings.headpose, weights_store)
    headpose = facexformer.FaceXFormerHeadPose(weights_store, inference_options) if use_facexformer else None
    return in_process(settings, quality, headpose, vad_provenance())


def published_gt_blockers(s: RunSettings, vad: str, quality: dict, headpose: str,
                          networks: dict | None = None) -> list[str]:
    """Why results scored this way cannot be compared with the published GT row ([]: they can).

    The published figures come from the reference code: all its settings, its passes, its VAD
    model and audio extraction, and the quality models' own weights."""
    out = []
    if s.profile != "reference":
        out.append(f"profile {s.profile} (the published figures are the reference code's)")
    if s.single_pass:
        out.append("single FaceMesh pass (--single-pass): the reference runs its own passes")
    if s.frame_stride != 1:
        out.append(f"frame stride {s.frame_stride}: the reference uses every frame")
    if s.normalise_translation:
        out.append("head-motion translation normalised to 512 px: the reference uses pixels")
    if HEADPOSE_RIGID_FIT in headpose:
        out.append(f"head pose by {HEADPOSE_RIGID_FIT}, an offline stand-in: the reference "
                   "estimates it with FaceXFormer on RetinaFace crops")
    if REFERENCE_VAD not in vad:
        out.append(f"VAD {vad!r}: the reference uses {REFERENCE_VAD}")
    proxies = sorted(m for m, d in quality["quality"].items() if str(d).startswith("proxy:"))
    if proxies:
        out.append(f"training-free proxy for {', '.join(proxies)}: the published figures come from "
                   "the quality models (put their weights in the store: `theval weights status`)")
    precision = precision_label(networks)
    if precision != FP32:
        out.append(f"networks at {precision}: the reference computes in fp32")
    stand_ins = sorted(m for m, d in quality["quality"].items() if " weights: stand-in:" in str(d))
    if "stand-in:" in headpose:
        stand_ins.append("head pose")
    if stand_ins:
        out.append(f"deterministic stand-in weights for {', '.join(stand_ins)}: their scores mean "
                   "nothing (`theval weights verify`)")
    return out


def headline(provenance: dict) -> str:
    """One line above a leaderboard: how its numbers were computed."""
    landmarks = provenance.get("landmarks") or {}
    passes = landmarks.get("passes", []) if isinstance(landmarks, dict) else []
    mesh = ("the reference's own FaceMesh passes" if "silent_lip" in passes
            else "one shared FaceMesh pass (--single-pass)")
    quality = sorted(set(map(str, (provenance.get("quality") or {}).values())))
    quality = ", ".join(q.split(" ")[0] for q in quality) or "not recorded"
    headpose = str(provenance.get("headpose") or "not recorded").split(" ")[0]
    return (f"Scored with: profile {provenance.get('profile', '?')}; {mesh}; frames "
            f"{provenance.get('frames', '?')}; quality {quality}; head pose {headpose}; "
            f"VAD {provenance.get('vad', '?')}")
