"""FID and FVD oracle: pytorch-fid's own code and StyleGAN-V's own FVD code, unmodified, on frames of
the parity clips and the STAND-IN weights, writing ../classic/fid_fvd_oracle.json.

Run with the reference environment's Python (models-venv: torch 2.6.0, torchvision 0.21.0, scipy,
plus `pip install --no-deps pytorch-fid==0.3.0` and `pip install omegaconf` for StyleGAN-V's imports):

    $ORACLE_MODELS_VENV/bin/python tests/data/parity/reference-env/run_fid_fvd_reference.py \
        --stylegan-v STYLEGAN_V_CHECKOUT [--project-python .venv/bin/python]

Step 1 runs in the PROJECT's Python (this file, `prepare`): it writes the stand-in weights with
theval_mesh.backends.stand_in.write (seed 0, the FID and FVD networks) and decodes the clips with the project's
MediaReader, writing every frame used as a PNG (lossless: pytorch-fid reads the same uint8 values).
Step 2 (this Python): FID with `pytorch_fid.fid_score.calculate_fid_given_paths` (its InceptionV3,
its weights loader reading the stand-in from $TORCH_HOME/hub/checkpoints, its ImagePathDataset,
calculate_frechet_distance) on the two PNG folders; FVD with StyleGAN-V's
`src.metrics.frechet_video_distance.compute_fvd` (its MetricOptions, compute_feature_stats_for_dataset,
FeatureStats and distance; its detector URL resolved by its own dnnlib cache lookup to the stand-in
i3d_torchscript.pt). Only the inputs are ours: the frames, a dataset class yielding them as
StyleGAN-V's datasets do ({'image': uint8 [t, c, h, w]}), the weight files.

Sets: A = the `*_gt` clips, B = the `*_noisy` clips of the same four speakers; frames 0-31 of each
(128 frames a side for FID; two 16-frame windows, frames 0-15 and 16-31, per video: 8 clips a side
for FVD).
"""
import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
CLIPS = ROOT / "tests" / "data" / "parity" / "clips"
OUT = ROOT / "tests" / "data" / "parity" / "classic" / "fid_fvd_oracle.json"
SPEAKERS = ("astronaut_de", "t1center_en", "t1left_de", "tom_it")
SETS = {"A": "gt", "B": "noisy"}
FRAMES = 32  # frames 0..31 of each clip
CLIP_LENGTH = 16
SEED = 0
I3D_URL = "https://www.dropbox.com/s/ge9e5ujwgetktms/i3d_torchscript.pt?dl=1"  # StyleGAN-V's detector_url


def prepare(work: Path) -> None:
    """In the project's Python: stand-in weights and the frames as PNG files."""
    from PIL import Image

    from theval_mesh.backends import stand_in
    from theval_mesh.backends.media.decode import MediaReader

    marker = stand_in.write(work / "store", SEED, models=(), classic=["fid-inception", "fvd-i3d"])
    for side, kind in SETS.items():
        for speaker in SPEAKERS:
            folder = work / "frames" / side / speaker
            folder.mkdir(parents=True, exist_ok=True)
            reader = MediaReader(CLIPS / f"{speaker}_{kind}.mp4")
            for index, frame in reader.frames():
                if index >= FRAMES:
                    break
                Image.fromarray(frame).save(folder / f"{index:03d}.png")
            reader.close()
            flat = work / "flat" / side
            flat.mkdir(parents=True, exist_ok=True)
            for png in sorted(folder.glob("*.png")):
                shutil.copy(png, flat / f"{speaker}_{png.name}")
    (work / "marker.json").write_text(json.dumps(marker))


class ClipFolders:
    """StyleGAN-V-style video dataset over our PNG folders (one folder a video): item = one
    16-frame window, {'image': uint8 [t, c, h, w]}; windows 0-15, 16-31 of every video."""

    def __init__(self, path, resolution, load_n_consecutive=CLIP_LENGTH, subsample_factor=1,
                 discard_short_videos=True, load_n_consecutive_random_offset=False, **_):
        assert subsample_factor == 1
        self.name = Path(path).name
        self.resolution = resolution
        self.items = []
        for video in sorted(Path(path).iterdir()):
            pngs = sorted(video.glob("*.png"))
            for start in range(0, len(pngs) - load_n_consecutive + 1, load_n_consecutive):
                self.items.append(pngs[start:start + load_n_consecutive])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        import numpy as np
        from PIL import Image

        frames = [np.asarray(Image.open(p).convert("RGB")).transpose(2, 0, 1) for p in self.items[i]]
        return {"image": np.stack(frames)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", nargs="?", default="all", choices=["all", "prepare"])
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "fid_fvd_oracle")
    ap.add_argument("--stylegan-v", type=Path, help="a checkout of universome/stylegan-v (its src/)")
    ap.add_argument("--stylegan-v-commit", default="3fecd69c602e1cda204357201461c0fb0a634909")
    ap.add_argument("--project-python", default=str(ROOT / ".venv" / "bin" / "python"))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.step == "prepare":
        prepare(args.work)
        return
    if args.work.exists():
        shutil.rmtree(args.work)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'services'}:{ROOT}"}
    subprocess.run([args.project_python, __file__, "prepare", "--work", str(args.work)], env=env, check=True)
    marker = json.loads((args.work / "marker.json").read_text())
    store = args.work / "store"

    # pytorch-fid reads its weights with torch.hub's load_state_dict_from_url: $TORCH_HOME/hub/checkpoints
    os.environ["TORCH_HOME"] = str(args.work / "torch")
    ckpt = args.work / "torch" / "hub" / "checkpoints"
    ckpt.mkdir(parents=True)
    shutil.copy(store / "pt_inception-2015-12-05-6726825d.pth", ckpt)
    # StyleGAN-V's dnnlib.util.open_url looks the URL up in <DNNLIB_CACHE_DIR>/downloads/<md5(url)>_*
    os.environ["DNNLIB_CACHE_DIR"] = str(args.work / "dnnlib")
    cache = args.work / "dnnlib" / "downloads"
    cache.mkdir(parents=True)
    shutil.copy(store / "i3d_torchscript.pt",
                cache / f"{hashlib.md5(I3D_URL.encode()).hexdigest()}_i3d_torchscript.pt")

    import numpy as np
    import scipy
    import torch
    import torchvision
    from pytorch_fid import __version__ as fid_version
    from pytorch_fid import fid_score

    torch.set_num_threads(2)
    flat = [str(args.work / "flat" / side) for side in SETS]
    n_frames = [len(list(Path(p).glob("*.png"))) for p in flat]
    fid_value = float(fid_score.calculate_fid_given_paths(flat, batch_size=32, device="cpu", dims=2048,
                                                          num_workers=0))

    sys.path.insert(0, str(args.stylegan_v))
    sys.modules.setdefault("run_fid_fvd_reference", sys.modules["__main__"])  # the dataset class by name
    from src import dnnlib
    from src.metrics import frechet_video_distance, metric_utils

    def kwargs(side):
        return dnnlib.EasyDict(class_name="run_fid_fvd_reference.ClipFolders",
                               path=str(args.work / "frames" / side), resolution=512)

    clips = [len(ClipFolders(kwargs(side).path, 512)) for side in SETS]
    opts = metric_utils.MetricOptions(dataset_kwargs=kwargs("A"), gen_dataset_kwargs=kwargs("B"),
                                      generator_as_dataset=True, device=torch.device("cpu"), cache=False)
    fvd_value = frechet_video_distance.compute_fvd(opts, max_real=clips[0], num_gen=clips[1],
                                                   num_frames=CLIP_LENGTH)

    result = {
        "fid": fid_value, "fvd": fvd_value,
        "fid_frames": dict(zip(SETS, n_frames)), "fvd_clips": dict(zip(SETS, clips)),
        "fvd_videos": dict.fromkeys(SETS, len(SPEAKERS)),
        "sets": {side: [f"{s}_{kind}.mp4" for s in SPEAKERS] for side, kind in SETS.items()},
        "frames": f"0-{FRAMES - 1} of each clip; FVD windows 0-15 and 16-31",
        "stand_in": {"seed": SEED, "generator": marker["generator"],
                     "values_sha256": {k: v["values_sha256"] for k, v in marker["files"].items()}},
        "reference": {
            "fid": f"pytorch-fid {fid_version}: fid_score.calculate_fid_given_paths(batch_size=32, dims=2048)",
            "fvd": f"universome/stylegan-v {args.stylegan_v_commit}: src/metrics/frechet_video_distance.compute_fvd"
                   f"(num_frames={CLIP_LENGTH}) with generator_as_dataset",
        },
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "numpy": np.__version__, "scipy": scipy.__version__},
        "command": " ".join(["python", "tests/data/parity/reference-env/run_fid_fvd_reference.py",
                             "--stylegan-v", "STYLEGAN_V_CHECKOUT"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: result[k] for k in ("fid", "fvd", "fid_frames", "fvd_clips")}))


if __name__ == "__main__":
    main()
