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
as the README does: `calculate_fvd(videos1, videos2, device, method=METHOD, only_final=True)` for
both methods, 'styleganv' (the stand-in `i3d_torchscript.pt`) and 'videogpt' (the stand-in
`i3d_pretrained_400.pt`, put at `fvd/videogpt/`). The features of each side come from its own
`get_fvd_feats` / `get_fvd_logits` too, so the test can compare them; and the FVD once more from its
own functions with one video per detector call (`bs=1`; its default puts the 4 videos in one call),
since the videogpt method's value moves with that (docs/classic-metrics.md).
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
    marker = stand_in.write(args.work / "store", SEED, models=(), classic=["fvd-i3d", "fvd-i3d-videogpt"])
    shutil.copy(args.work / "store" / "i3d_torchscript.pt", code / "fvd" / "styleganv" / "i3d_torchscript.pt")
    shutil.copy(args.work / "store" / "i3d_pretrained_400.pt", code / "fvd" / "videogpt" / "i3d_pretrained_400.pt")

    import numpy as np
    import scipy
    import torch

    torch.set_num_threads(2)
    sys.path.insert(0, str(code))
    from calculate_fvd import calculate_fvd, trans
    from fvd.styleganv import fvd as styleganv
    from fvd.videogpt import fvd as videogpt

    device = torch.device("cpu")
    sides = {name: videos(kind) for name, kind in SETS.items()}
    out = {}
    one_by_one = {  # the same functions, one video per detector call (their bs=10 puts all 4 in one)
        "styleganv": lambda v, i3d: styleganv.get_feats(trans(v), i3d, device, bs=1),
        "videogpt": lambda v, i3d: videogpt.get_logits(i3d, videogpt.preprocess(trans(v)), device, bs=1)}
    for method, module, features_of in (("styleganv", styleganv, styleganv.get_fvd_feats),
                                        ("videogpt", videogpt, videogpt.get_fvd_logits)):
        result = calculate_fvd(sides["videos1"], sides["videos2"], device, method=method, only_final=True)
        i3d = module.load_i3d_pretrained(device=device)
        single = [one_by_one[method](sides[name], i3d) for name in SETS]
        out[f"common-metrics-{method}"] = {
            "fvd": result["value"][0],
            "features": {name: np.asarray(features_of(trans(v), i3d=i3d, device=device)).tolist()
                         for name, v in sides.items()},
            "fvd_one_video_per_call": module.frechet_distance(*single),
            "call": f"calculate_fvd(videos1, videos2, torch.device('cpu'), method='{method}', only_final=True); "
                    f"features: fvd.{method}.fvd.{features_of.__name__}(trans(videos), i3d=load_i3d_pretrained()); "
                    "fvd_one_video_per_call: its frechet_distance of the features computed with bs=1",
        }
    out.update({
        "sets": {name: [f"{s}_{kind}.mp4" for s in SPEAKERS] for name, kind in SETS.items()},
        "frames": f"0-{FRAMES - 1} of each clip, uint8 / 255 as float32, [videos, frames, 3, H, W]",
        "reference": f"JunyaoHu/common_metrics_on_video_quality {args.commit}, unmodified",
        "stand_in": {"seed": SEED, "generator": marker["generator"],
                     "values_sha256": {k: v["values_sha256"] for k, v in marker["files"].items()}},
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                     "scipy": scipy.__version__},
        "command": "python tests/data/parity/reference-env/run_fvd_variants_reference.py --checkout CHECKOUT",
    })
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: v["fvd"] for k, v in out.items() if k.startswith("common-metrics")}))


if __name__ == "__main__":
    main()
