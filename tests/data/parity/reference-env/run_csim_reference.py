"""CSIM by insightface's OWN code on stand-in ArcFace weights: `recognition/arcface_torch/backbones/
iresnet.py` (iresnet100) and `python-package/insightface/utils/face_align.py` (`norm_crop`), imported
unmodified from a checkout of deepinsight/insightface, on frames of the parity clips.

The frames and their five points come from the project (its decoder and its FaceMesh five points,
written by --project-python into the oracle), so the comparison isolates what CSIM adds: the
alignment, the network, the input scaling ((x / 255 - 0.5) / 0.5, arcface_torch's) and the cosine.
CSIM of a pair: the mean over the generated clip's frames of the cosine between its face's embedding
and the source clip's first frame's.

Usage (a venv with torch, opencv-python, scikit-image, numpy):
  python run_csim_reference.py --insightface CHECKOUT --weights STORE --project-python PY --out DIR
STORE holds the stand-in `backbone.pth` (`theval weights stand-in --model arcface --seed 0`).
"""
import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np

PAIRS = [("astronaut_de_gt", "astronaut_de_noisy"), ("t1center_en_gt", "t1center_en_blur"),
         ("t1left_de_gt", "t1left_de_exaggerated"), ("tom_it_gt", "tom_it_static_head")]
FRAMES = 16
DUMP = """
import json, sys
import numpy as np
from theval_mesh.backends.landmarks.backend import FaceTracker
from theval_mesh.backends.landmarks.passes import SINGLE
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.metrics import identity
clips, frames, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
result = {}
for pair in json.loads(sys.argv[4]):
    for role, name, n in (("source", pair[0], 1), ("generated", pair[1], frames)):
        images, points = [], []
        with FaceTracker(SINGLE) as tracker:
            for i, rgb in MediaReader(f"{clips}/{name}.mp4").frames():
                if i >= n:
                    break
                p = tracker.process(rgb)
                h, w = rgb.shape[:2]
                images.append(rgb)
                points.append(identity.five_points(p[:, :2] * (w, h)).tolist())
        np.save(f"{out}/{name}-{role}.npy", np.stack(images))
        result[f"{name}-{role}"] = points
json.dump(result, open(f"{out}/points.json", "w"))
"""


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--insightface", required=True, type=Path)
    p.add_argument("--weights", required=True, type=Path)
    p.add_argument("--project-python", required=True)
    p.add_argument("--clips", type=Path, default=Path(__file__).resolve().parents[1] / "clips")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "csim-oracle-work")
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args()
    import torch
    torch.set_num_threads(2)
    args.work.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.project_python, "-c", DUMP, str(args.clips), str(FRAMES), str(args.work),
                    json.dumps(PAIRS)], check=True)
    points = json.loads((args.work / "points.json").read_text())
    iresnet = _module(args.insightface / "recognition/arcface_torch/backbones/iresnet.py", "iresnet")
    face_align = _module(args.insightface / "python-package/insightface/utils/face_align.py", "face_align")
    net = iresnet.iresnet100()
    weights = args.weights / "backbone.pth"
    net.load_state_dict(torch.load(weights, map_location="cpu"))
    net.eval()

    def embed(images, pts):
        faces = [face_align.norm_crop(img, np.array(pt, np.float32)) for img, pt in zip(images, pts)]
        x = torch.from_numpy(np.stack(faces)).permute(0, 3, 1, 2).float()
        x.div_(255).sub_(0.5).div_(0.5)
        with torch.no_grad():
            return net(x).numpy().astype(np.float64), faces

    rows = []
    for source, generated in PAIRS:
        src_img = np.load(args.work / f"{source}-source.npy")
        gen_img = np.load(args.work / f"{generated}-generated.npy")
        (src,), src_faces = embed(src_img, points[f"{source}-source"])
        gen, gen_faces = embed(gen_img, points[f"{generated}-generated"])
        cos = gen @ src / (np.linalg.norm(gen, axis=1) * np.linalg.norm(src))
        rows.append({"source": source, "generated": generated, "frames": len(gen), "csim": float(cos.mean()),
                     "cosines": cos.tolist(), "source_points": points[f"{source}-source"][0],
                     "generated_points": points[f"{generated}-generated"],
                     "source_face_sum": int(np.asarray(src_faces[0], np.int64).sum())})
        print(source, generated, rows[-1]["csim"], flush=True)
    commit = subprocess.run(["git", "-C", str(args.insightface), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    doc = {"pairs": rows, "frames": FRAMES, "insightface": commit,
           "versions": {m: version(m) for m in ("torch", "numpy", "opencv-python", "scikit-image")},
           "weights": {"file": weights.name, "sha256": hashlib.sha256(weights.read_bytes()).hexdigest()},
           "python": sys.version.split()[0],
           "command": "run_csim_reference.py --insightface CHECKOUT --weights STORE --project-python PY --out DIR"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "csim_oracle.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
