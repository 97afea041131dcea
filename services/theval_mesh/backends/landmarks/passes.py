"""FaceMesh passes: which settings each landmark metric's reference script used.

The default runs the reference code's own passes; `--single-pass` runs ONE pass (full
resolution, refined, tracking, RGB) and derives every landmark metric from it.
"""
from dataclasses import dataclass

from theval_mesh.pure.metrics import registry as metric


@dataclass(frozen=True)
class MeshPass:
    name: str
    resize_256: bool = False  # run the mesh on the frame resized to 256x256
    refine: bool = True       # 478 points with the attention (refined) model, else 468
    static: bool = False      # static_image_mode: detect on every frame, no tracking
    bgr: bool = False         # hand FaceMesh channel-swapped frames (the lip-sync quirk)


SINGLE = MeshPass("single")

# The reference scripts' passes (docs/metrics.md, "Shared conventions": the passes). A pass
# one metric alone uses is named after it (compute.py finds it by the metric's key).
LIP_DYNAMICS = MeshPass(metric.LIP_DYNAMICS.key, resize_256=True)
EYEBROW = MeshPass("eyebrow")
SILENT_LIP = MeshPass("silent_lip", resize_256=True)
LIP_SYNC_REFERENCE = MeshPass(metric.LIP_SYNC.key, refine=False, bgr=True)
LIP_SYNC_PAPER = MeshPass(metric.LIP_SYNC.key, refine=False)
MOUTH_QUALITY = MeshPass(metric.MOUTH_QUALITY.key, refine=False, static=True)
