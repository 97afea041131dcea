"""FaceMesh passes: which settings each landmark metric's reference script used.

The default runs the reference code's own passes; `--single-pass` runs ONE pass (full
resolution, refined, tracking, RGB) and derives every landmark metric from it.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class MeshPass:
    name: str
    resize_256: bool = False  # run the mesh on the frame resized to 256x256
    refine: bool = True       # 478 points with the attention (refined) model, else 468
    static: bool = False      # static_image_mode: detect on every frame, no tracking
    bgr: bool = False         # hand FaceMesh channel-swapped frames (the lip-sync quirk)


SINGLE = MeshPass("single")

# The reference scripts' passes (METRICS.md, "Which FaceMesh settings each metric used").
LIP_DYNAMICS = MeshPass("lip_dynamics", resize_256=True)
EYEBROW = MeshPass("eyebrow")
SILENT_LIP = MeshPass("silent_lip", resize_256=True)
LIP_SYNC_REFERENCE = MeshPass("lip_sync", refine=False, bgr=True)
LIP_SYNC_PAPER = MeshPass("lip_sync", refine=False)
MOUTH_QUALITY = MeshPass("mouth_quality", refine=False, static=True)
