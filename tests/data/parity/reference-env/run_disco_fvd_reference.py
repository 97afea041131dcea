"""DisCo FVD oracle: Wangt-CN/DisCo's own FVD-3DInception (tool/metrics/metric_center.py
`compute_fid_video_scores`, its dataset DatasetFVDVideoResize and its InceptionI3d), unmodified, on
parity clips and the STAND-IN `i3d_pretrained_400.pt`, writing ../classic/disco_fvd_oracle.json.

    pip install --no-deps --target EXTRA ffmpeg-python future lpips
    PYTHONPATH=EXTRA .venv/bin/python tests/data/parity/reference-env/run_disco_fvd_reference.py \
        --checkout DISCO_CHECKOUT

It runs in the project's Python: DisCo's metrics import torch, torchvision, numpy, scipy, PIL, cv2,
imageio and skimage (the project's) and ffmpeg-python and lpips (imported by its module, not used
here: EXTRA). Its tool/metrics folder is copied into a work folder, and the stand-in
`i3d_pretrained_400.pt` (seed 0, theval_mesh.backends.stand_in.write) is put where
`build_feature_extractor("FVD-3DInception", root_dir)` reads it (`root_dir/eval_fvd/`).

One thing differs from a GPU run: its compute_3d_video_prediction hands `torch.device('cuda')` to
get_batch_features; the runner wraps get_batch_features to run on the CPU instead (the same
function, another device).

Inputs: the first FRAMES frames of four speakers' `*_gt` and `*_noisy` clips, cut losslessly
(tests/support/model_parity_set.cut: the decoded frames are the originals') into gt/ and gen/,
read by its dataset through ffmpeg as DisCo reads an .mp4. Its FVD is
`compute_fid_video_scores(gen, gt, model, mode="FVD-3DInception", sample_duration=16, batch_size=1,
num_workers=0)` (DisCo's evaluation calls it with batch_size 1: its compute_3d_video_prediction
asserts that); the features of each side from its own compute_3d_video_prediction too.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
OUT = ROOT / "tests" / "data" / "parity" / "classic" / "disco_fvd_oracle.json"
SPEAKERS = ("astronaut_de", "t1center_en", "t1left_de", "tom_it")
SIDES = {"gen": "noisy", "gt": "gt"}
FRAMES = 24
SEED = 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkout", type=Path, required=True, help="a clone of Wangt-CN/DisCo")
    ap.add_argument("--commit", default="c4fa48a530729b3aec0bb46919f9006dbc2c9a30")
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "disco_fvd_oracle")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "services"))
    sys.path.insert(0, str(ROOT))
    from tests.support.model_parity_set import cut
    from theval_mesh.backends import stand_in

    if args.work.exists():
        shutil.rmtree(args.work)
    code = args.work / "disco"
    (code / "tool").mkdir(parents=True)
    shutil.copytree(args.checkout / "tool" / "metrics", code / "tool" / "metrics")
    marker = stand_in.write(args.work / "store", SEED, models=(), classic=["fvd-i3d-videogpt"])
    (args.work / "eval_fvd").mkdir()
    shutil.copy(args.work / "store" / "i3d_pretrained_400.pt", args.work / "eval_fvd" / "i3d_pretrained_400.pt")
    files = {}
    for side, kind in SIDES.items():
        (args.work / side).mkdir()
        files[side] = [str(cut(f"{s}_{kind}", FRAMES, args.work / side / f"{s}.mp4")) for s in SPEAKERS]

    import numpy as np
    import scipy
    import torch

    torch.set_num_threads(2)
    sys.path.insert(0, str(code))
    from tool.metrics import metric_center
    from tool.metrics.features import build_feature_extractor
    from tool.metrics.utils import DatasetFVDVideoResize

    cpu = torch.device("cpu")
    own = metric_center.get_batch_features
    metric_center.get_batch_features = lambda batch, model, device: own(batch, model, cpu)
    model = build_feature_extractor(mode="FVD-3DInception", root_dir=str(args.work), device=cpu)
    value = metric_center.compute_fid_video_scores(files["gen"], files["gt"], model, mode="FVD-3DInception",
                                                   sample_duration=16, batch_size=1, num_workers=0)
    features = {side: metric_center.compute_3d_video_prediction(
        DatasetFVDVideoResize(paths, 16, "FVD-3DInception", 224), model, batch_size=1, num_workers=0).tolist()
        for side, paths in files.items()}
    ffmpeg = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split("\n")[0]
    out = {
        "disco": {"fvd": float(value), "features": features},
        "sets": {side: [f"{s}_{kind}.mp4" for s in SPEAKERS] for side, kind in SIDES.items()},
        "frames": f"0-{FRAMES - 1} of each clip, cut losslessly (libx264 qp 0) and read by its dataset through ffmpeg",
        "call": "compute_fid_video_scores(gen, gt, build_feature_extractor('FVD-3DInception', root_dir), "
                "mode='FVD-3DInception', sample_duration=16, batch_size=1, num_workers=0), on the CPU; "
                "features: compute_3d_video_prediction(DatasetFVDVideoResize(files, 16, 'FVD-3DInception', 224), ...)",
        "reference": f"Wangt-CN/DisCo {args.commit} tool/metrics, unmodified",
        "stand_in": {"seed": SEED, "generator": marker["generator"],
                     "values_sha256": {k: v["values_sha256"] for k, v in marker["files"].items()}},
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                     "scipy": scipy.__version__, "ffmpeg": ffmpeg},
        "command": "python tests/data/parity/reference-env/run_disco_fvd_reference.py --checkout CHECKOUT",
    }
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps({"disco": out["disco"]["fvd"]}))


if __name__ == "__main__":
    main()
