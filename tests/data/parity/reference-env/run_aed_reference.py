"""AED by its OWN code on stand-in weights: AliaksandrSiarohin/pose-evaluation at 1bc4cae
(`extract.py --type face_id`, then `cmp.py`), run unmodified as scripts, with the OpenFacePytorch
its submodule pins (thnkim/OpenFacePytorch at d002218) in its place, on frames of the parity clips.

The frames come from the project's decoder (--project-python), written as PNG folders, the input
extract.py takes for a video, as for AKD (run_akd_reference.py, the same pairs and frames).
Environment shims only, none touching what its code computes:
- CUDA calls run on the CPU (extract.py builds the network with useCuda=True);
- torch.legacy, gone since torch 1.0, is given the two names SpatialCrossMapLRN_temp.py imports
  (`Module`, whose forward calls updateOutput, and `clear`), as torch 0.4.1 (the pinned one) had;
- scikit-image's resize gets the defaults of the 0.14.0 pose-evaluation pins (mode 'constant',
  no anti-aliasing) where the caller passes none: later releases blur before down-sampling;
- the stand-in `openface.pth` sits beside loadOpenFace.py, where the repository keeps the real one.

Usage (a venv with torch, scikit-image, pandas, imageio, tqdm):
  python run_aed_reference.py --pose-evaluation CHECKOUT --openface CHECKOUT --weights STORE \\
      --project-python PY --out DIR
STORE holds the stand-in (`theval weights stand-in --model openface --seed 0`).
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from run_akd_reference import CUDA_ON_CPU, FRAMES, PAIRS, RUN_SCRIPT, SIDE, dump_frames, extracted

WEIGHTS = "openface.pth"
SCRIPTS = ("extract.py", "cmp.py", "util.py")
OPENFACE_CODE = ("loadOpenFace.py", "SpatialCrossMapLRN_temp.py")
# torch.legacy, as far as SpatialCrossMapLRN_temp.py uses it, and scikit-image 0.14.0's resize defaults
LEGACY = """
import types
class Module:  # torch 0.4.1's torch.legacy.nn.Module: forward calls updateOutput
    def __init__(self):
        self.gradInput, self.output = torch.Tensor(), torch.Tensor()
    def forward(self, input):
        return self.updateOutput(input)
names = ("torch.legacy", "torch.legacy.nn", "torch.legacy.nn.Module", "torch.legacy.nn.utils")
legacy = {n: types.ModuleType(n) for n in names}
legacy["torch.legacy.nn.Module"].Module = Module
legacy["torch.legacy.nn.utils"].clear = lambda *a, **k: None
sys.modules.update(legacy)
import skimage.transform
resize = skimage.transform.resize
def resize_014(image, output_shape, *args, mode="constant", anti_aliasing=False, **kwargs):
    return resize(image, output_shape, *args, mode=mode, anti_aliasing=anti_aliasing, **kwargs)
skimage.transform.resize = resize_014
"""
SHIM = CUDA_ON_CPU + LEGACY + RUN_SCRIPT


def _files(repo: Path, commit: str, names, dest: Path) -> str:
    """The named files of repo (a checkout or a mirror) at commit, unmodified, into dest; the commit."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        (dest / name).write_bytes(subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{name}"], check=True,
                                                 capture_output=True).stdout)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", commit], capture_output=True, text=True,
                          check=True).stdout.strip()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pose-evaluation", required=True, type=Path)
    p.add_argument("--openface", required=True, type=Path)
    p.add_argument("--weights", required=True, type=Path)
    p.add_argument("--project-python", required=True)
    p.add_argument("--clips", type=Path, default=Path(__file__).resolve().parents[1] / "clips")
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args()
    work = dump_frames(args.project_python, args.clips, "aed-oracle-")
    code = work / "pose-evaluation"
    commits = {"pose_evaluation": _files(args.pose_evaluation, "HEAD", SCRIPTS, code)}
    # its submodule at the commit it pins: the code; the weights are the stand-in
    pinned = subprocess.run(["git", "-C", str(args.pose_evaluation), "rev-parse", "HEAD:OpenFacePytorch"],
                            capture_output=True, text=True, check=True).stdout.strip()
    commits["openface"] = _files(args.openface, pinned, OPENFACE_CODE, code / "OpenFacePytorch")
    shutil.copy(args.weights / WEIGHTS, code / "OpenFacePytorch" / WEIGHTS)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(code)}
    for role in ("gt", "generated"):
        subprocess.run([sys.executable, "-c", SHIM, str(code / "extract.py"), "--in_folder", str(work / role),
                        "--out_file", str(work / f"{role}.pkl"), "--is_video", "--type", "face_id",
                        "--image_shape", f"{SIDE},{SIDE}"], check=True, env=env, cwd=code)
    run = subprocess.run([sys.executable, str(code / "cmp.py"), str(work / "gt.pkl"), str(work / "generated.pkl")],
                         check=True, env=env, capture_output=True, text=True)
    aed = float(run.stdout.strip().rsplit(" ", 1)[1])
    embeddings = extracted(work, lambda value: value.reshape(-1).tolist())
    doc = {"pairs": PAIRS, "frames": FRAMES, "side": SIDE, "aed": aed, "cmp_stdout": run.stdout.strip(),
           "embeddings": embeddings, **commits,
           "versions": {m: version(m) for m in ("torch", "numpy", "scikit-image", "pandas", "imageio")},
           "weights": {WEIGHTS: hashlib.sha256((args.weights / WEIGHTS).read_bytes()).hexdigest()},
           "python": sys.version.split()[0],
           "command": "run_aed_reference.py --pose-evaluation CHECKOUT --openface CHECKOUT --weights STORE "
                      "--project-python PY --out DIR"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "aed_oracle.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("AED", aed)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
