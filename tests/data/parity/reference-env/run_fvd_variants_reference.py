"""FVD variants oracle: JunyaoHu/common_metrics_on_video_quality's own `calculate_fvd`, unmodified,
on the parity clips and the STAND-IN I3D, writing ../classic/fvd_variants_oracle.json.

    .venv/bin/python tests/data/parity/reference-env/run_fvd_variants_reference.py \
        --checkout COMMON_METRICS_CHECKOUT

It runs in the project's Python: the toolkit needs only torch, numpy, scipy, einops and tqdm (its
README pins torch 1.13.1 and numpy < 2; the versions used are recorded). Its files are copied into
a work folder, and the stand-in `i3d_torchscript.pt` (seed 0, theval_mesh.backends.stand_in.write)
is put where its `load_i3d_pretrained` looks for the downloaded file (`fvd/styleganv/`). Only the
inputs are ours: the frames, decoded by the project's MediaReader, as its README asks for them:
float tensors in [0, 1] shaped [videos, frames, 3, H, W] (uint8 / 255).

Sets: videos1 (the README's "original") = the `*_gt` clips, videos2 = the `*_noisy` clips of the
same four speakers, frames 0-15 of each (one 16-frame clip a video, the FVD-16 convention), called
as the README does: `calculate_fvd(videos1, videos2, device, method='styleganv', only_final=True)`.
The features of each side come from its own `get_fvd_feats` too, so the test can compare them.
"""
import argparse
import json
import os
import platform
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
CLIPS = ROOT / "tests" / "data" / "parity" / "clips"
OUT = ROOT / "tests" / "data" / "parity" / "classic" / "fvd_variants_oracle.json"
SPEAKERS = ("astronaut_de", "t1center_en", "t1left_de", "tom_it")
SETS = {"videos1": "gt", "videos2": "noisy"}
FRAMES = 16
SEED = 0


def videos(kind: str):
    """[4, 16, 3, H, W] float32 in [0, 1]: frames 0-15 of each speaker's clip, uint8 / 255."""
    import itertools

    import numpy as np
    import torch

    from theval_mesh.backends.media.decode import MediaReader

    out = []
    for speaker in SPEAKERS:
        reader = MediaReader(CLIPS / f"{speaker}_{kind}.mp4")
        try:
            out.append(np.stack([f for _, f in itertools.islice(reader.frames(), FRAMES)]))
        finally:
            reader.close()
    return torch.from_numpy(np.stack(out)).permute(0, 1, 4, 2, 3).float() / 255.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkout", type=Path, required=True, help="a clone of JunyaoHu/common_metrics_on_video_quality")
    ap.add_argument("--commit", default="5f751734ce9cef4cd2dddb235726b75dff62a387")
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "fvd_variants_oracle")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "services"))
    from theval_mesh.backends import stand_in

    if args.work.exists():
        shutil.rmtree(args.work)
    code = args.work / "common_metrics"
    shutil.copytree(args.checkout, code, ignore=shutil.ignore_patterns(".git", "*.pt", "*.pth", "tensorflow"))
    marker = stand_in.write(args.work / "store", SEED, models=(), classic=["fvd-i3d"])
    shutil.copy(args.work / "store" / "i3d_torchscript.pt", code / "fvd" / "styleganv" / "i3d_torchscript.pt")

    import numpy as np
    import scipy
    import torch

    torch.set_num_threads(2)
    sys.path.insert(0, str(code))
    from calculate_fvd import calculate_fvd, trans
    from fvd.styleganv.fvd import get_fvd_feats, load_i3d_pretrained

    device = torch.device("cpu")
    sides = {name: videos(kind) for name, kind in SETS.items()}
    result = calculate_fvd(sides["videos1"], sides["videos2"], device, method="styleganv", only_final=True)
    i3d = load_i3d_pretrained(device=device)
    features = {name: get_fvd_feats(trans(v), i3d=i3d, device=device).tolist() for name, v in sides.items()}
    out = {
        "common-metrics-styleganv": {
            "fvd": result["value"][0],
            "features": features,
            "call": "calculate_fvd(videos1, videos2, torch.device('cpu'), method='styleganv', only_final=True); "
                    "features: fvd.styleganv.fvd.get_fvd_feats(trans(videos), i3d=load_i3d_pretrained())",
        },
        "sets": {name: [f"{s}_{kind}.mp4" for s in SPEAKERS] for name, kind in SETS.items()},
        "frames": f"0-{FRAMES - 1} of each clip, uint8 / 255 as float32, [videos, frames, 3, H, W]",
        "reference": f"JunyaoHu/common_metrics_on_video_quality {args.commit}, unmodified",
        "stand_in": {"seed": SEED, "generator": marker["generator"],
                     "values_sha256": {k: v["values_sha256"] for k, v in marker["files"].items()}},
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                     "scipy": scipy.__version__},
        "command": "python tests/data/parity/reference-env/run_fvd_variants_reference.py --checkout CHECKOUT",
    }
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps({"common-metrics-styleganv": out["common-metrics-styleganv"]["fvd"]}))


if __name__ == "__main__":
    main()
