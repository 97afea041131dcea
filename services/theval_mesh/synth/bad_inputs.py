"""Files with one defect each, for the bad-input handling tests."""
from pathlib import Path

import numpy as np

from theval_mesh.synth.face_geometry import face_geometry
from theval_mesh.synth.face_warp import FaceRenderer
from theval_mesh.synth.kit import gt_signals
from theval_mesh.synth.mp4 import write_mp4
from theval_mesh.synth.speech import SAMPLE_RATE

BAD_INPUTS = ("corrupt", "not_a_video", "no_audio", "no_face")


def write_bad_inputs(out_dir, size: int = 256, fps: int = 25, duration_s: float = 2.0,
                     seed: int = 0) -> dict:
    """Write corrupt.mp4 (a real clip cut to half its bytes: no index, cannot be opened),
    not_a_video.mp4 (text), no_audio.mp4 (a talking face, no audio track) and no_face.mp4
    (speech over a noisy gradient). Returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sig, _ = gt_signals(seed, 0, "en", duration_s, fps, size)
    renderer = FaceRenderer(face_geometry(size), max_open=float(sig.mouth_open.max()),
                            max_brow=float(sig.brow_raise.max()))
    n = len(sig.mouth_open)
    faces = [renderer.render(sig.mouth_open[t], sig.brow_raise[t], sig.roll_deg[t], sig.tx[t],
                             sig.ty[t]) for t in range(n)]
    paths = {name: out / f"{name}.mp4" for name in BAD_INPUTS}

    write_mp4(paths["no_audio"], faces, fps, audio=None)

    whole = write_mp4(out / "whole.tmp.mp4", faces, fps, sig.audio, SAMPLE_RATE)
    data = whole.read_bytes()
    paths["corrupt"].write_bytes(data[:len(data) // 2])
    whole.unlink()

    paths["not_a_video"].write_text("This is a text file with an .mp4 name, not a video.\n")

    rng = np.random.default_rng(seed)
    ramp = np.linspace(40, 215, size, dtype=np.float32)
    gradient = np.stack([ramp[None, :] + 0 * ramp[:, None], ramp[:, None] + 0 * ramp[None, :],
                         np.full((size, size), 128, np.float32)], axis=-1)
    plain = (np.clip(gradient + rng.normal(0, 12, (n, size, size, 3)), 0, 255).astype(np.uint8))
    write_mp4(paths["no_face"], plain, fps, sig.audio, SAMPLE_RATE)
    return paths
