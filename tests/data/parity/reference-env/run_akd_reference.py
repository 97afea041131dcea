"""AKD by its OWN code on stand-in weights: AliaksandrSiarohin/pose-evaluation at 1bc4cae
(`extract.py --type face_pose`, then `cmp_kp.py`), run unmodified as scripts, with the
face-alignment its submodule pins (1adrianb/face-alignment at 3750f83, imported from a checkout),
on frames of the parity clips.

The frames come from the project's decoder (--project-python), written as PNG folders, the input
extract.py takes for a video (util.frames2array reads a folder's images in name order), so the
comparison isolates what AKD adds: face-alignment's S3FD, its crop, FAN, its read-out and
cmp_kp.py's distance. Environment shims only, none touching what is computed: CUDA calls run on
the CPU (extract.py builds FaceAlignment with its default device "cuda"), and the stand-in
`2DFAN-4.pth.tar` and `s3fd_convert.pth` sit in face-alignment's data directory
(FACEALIGNMENT_USERDIR/.face_alignment/data), where it would download the real ones.

Usage (a venv with torch, opencv-python, scikit-image, scipy, pandas, imageio, tqdm):
  python run_akd_reference.py --pose-evaluation CHECKOUT --face-alignment CHECKOUT --weights STORE \
      --project-python PY --out DIR
STORE holds the stand-ins (`theval weights stand-in --model fan-2d --model s3fd-fa --seed 0`).
"""
import argparse
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

# (ground truth, generated): the generated clip's frames are scored against the ground truth's
PAIRS = [("astronaut_de_gt", "astronaut_de_noisy"), ("tom_it_gt", "tom_it_static_head"),
         ("t1center_en_gt", "t1center_en_blur")]
FRAMES = 4
SIDE = 256  # FOMM's evaluation frames (VoxCeleb at 256 x 256): the parity frames resized (cv2 INTER_AREA)
WEIGHTS = ("2DFAN-4.pth.tar", "s3fd_convert.pth")
DUMP = """
import sys
from pathlib import Path
import cv2
from theval_mesh.backends.media.decode import MediaReader
clips, frames, out, role, name, folder, side = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), *sys.argv[4:8]
(out / role / folder).mkdir(parents=True, exist_ok=True)
for i, rgb in MediaReader(f"{clips}/{name}.mp4").frames():
    if i >= frames:
        break
    rgb = cv2.resize(rgb, (int(side), int(side)), interpolation=cv2.INTER_AREA)
    cv2.imwrite(str(out / role / folder / f"{i:05d}.png"), rgb[..., ::-1])
"""
# Runs one of pose-evaluation's scripts as __main__ with CUDA mapped to the CPU.
CUDA_ON_CPU = """
import runpy, sys, torch
def cpu(device):
    return "cpu" if device is not None and "cuda" in str(device) else device
module_to, tensor_to = torch.nn.Module.to, torch.Tensor.to
torch.nn.Module.to = lambda self, *a, **k: module_to(self, *[cpu(x) if isinstance(x, (str, torch.device)) else x for x in a], **k)
torch.Tensor.to = lambda self, *a, **k: tensor_to(self, *[cpu(x) if isinstance(x, (str, torch.device)) else x for x in a], **k)
torch.nn.Module.cuda = lambda self, *a, **k: self
torch.Tensor.cuda = lambda self, *a, **k: self
"""
RUN_SCRIPT = """
script, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""
SHIM = CUDA_ON_CPU + RUN_SCRIPT


def dump_frames(project_python: str, clips: Path, prefix: str) -> Path:
    """A work folder with gt/ and generated/: one PNG folder per clip of PAIRS (FRAMES frames at
    SIDE x SIDE), named after the pair's GT clip: pose-evaluation pairs videos by file name."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    for gt, generated in PAIRS:
        for role, name in (("gt", gt), ("generated", generated)):
            subprocess.run([project_python, "-c", DUMP, str(clips), str(FRAMES), str(work), role, name,
                            gt, str(SIDE)], check=True)
    return work


def extracted(work: Path, convert) -> dict:
    """{role: {video: {frame: convert(value)}}} from extract.py's gt.pkl and generated.pkl."""
    out = {}
    for role in ("gt", "generated"):
        with open(work / f"{role}.pkl", "rb") as f:
            df = pickle.load(f).sort_values(by=["file_name", "frame_number"])
        for name, frame, value in zip(df["file_name"], df["frame_number"], df["value"], strict=True):
            out.setdefault(role, {}).setdefault(name, {})[int(frame)] = convert(value)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pose-evaluation", required=True, type=Path)
    p.add_argument("--face-alignment", required=True, type=Path)
    p.add_argument("--weights", required=True, type=Path)
    p.add_argument("--project-python", required=True)
    p.add_argument("--clips", type=Path, default=Path(__file__).resolve().parents[1] / "clips")
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args()
    work = dump_frames(args.project_python, args.clips, "akd-oracle-")
    data = work / "home" / ".face_alignment" / "data"
    data.mkdir(parents=True)
    for name in WEIGHTS:
        shutil.copy(args.weights / name, data / name)
    env = {**os.environ, "FACEALIGNMENT_USERDIR": str(work / "home"), "OMP_NUM_THREADS": "2",
           "PYTHONPATH": os.pathsep.join([str(args.face_alignment), str(args.pose_evaluation)])}
    for role in ("gt", "generated"):
        subprocess.run([sys.executable, "-c", SHIM, str(args.pose_evaluation / "extract.py"), "--in_folder",
                        str(work / role), "--out_file", str(work / f"{role}.pkl"), "--is_video", "--type",
                        "face_pose", "--image_shape", f"{SIDE},{SIDE}"], check=True, env=env, cwd=args.pose_evaluation)
    run = subprocess.run([sys.executable, str(args.pose_evaluation / "cmp_kp.py"), str(work / "gt.pkl"),
                          str(work / "generated.pkl")], check=True, env=env, capture_output=True, text=True)
    akd = float(run.stdout.strip().rsplit(" ", 1)[1])
    landmarks = extracted(work, lambda value: None if value is None else value.tolist())

    def commit(repo):
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"pairs": PAIRS, "frames": FRAMES, "side": SIDE, "akd": akd, "cmp_kp_stdout": run.stdout.strip(),
           "landmarks": landmarks, "pose_evaluation": commit(args.pose_evaluation),
           "face_alignment": commit(args.face_alignment),
           "versions": {m: version(m) for m in ("torch", "numpy", "opencv-python", "scikit-image", "pandas")},
           "weights": {n: hashlib.sha256((args.weights / n).read_bytes()).hexdigest() for n in WEIGHTS},
           "python": sys.version.split()[0],
           "command": "run_akd_reference.py --pose-evaluation CHECKOUT --face-alignment CHECKOUT --weights STORE "
                      "--project-python PY --out DIR"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "akd_oracle.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("AKD", akd)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
