"""LSE-C / AV offset by bytedance/LatentSync's OWN evaluation code (a229c39), on stand-in weights.

Runs, unmodified, from a copy of a LatentSync checkout: eval/eval_sync_conf.py's `syncnet_eval` (its
SyncNetDetector, eval/syncnet_detect.py: ffmpeg re-encoding to a 25 fps MP4, frames as JPEG, its
S3FD copy at conf 0.9 and scale 0.25, PySceneDetect, `track_face` with min_track=50, `crop_video`
to an mp4v MP4 with the track's audio in AAC; then SyncNetEval.evaluate on each crop), which returns
the video's AV offset (int of the mean of the tracks') and confidence (the mean of the tracks').
`syncnet_eval` drops each track's minimum distance; the runner asks the same SyncNetEval.evaluate
for it on the crops syncnet_eval left in detect_results/crop, so the file has an LSE-D too (the mean
of the tracks').

Environment only, nothing that computes: the stand-in `syncnet_v2.model` and `sfd_face.pth` (seed 0)
copied to checkpoints/auxiliary/, where its defaults read them (check_model_and_download finds them
and downloads nothing); its device is "cpu" by its own choice (no CUDA). Its imports need, beside
the project's venv (torch, torchvision, opencv, scipy, python_speech_features, matplotlib, imageio,
einops), scenedetect 0.5.6.1 and decord, installed into a folder of their own:

    .venv/bin/python -m pip install --no-deps --target EXTRA scenedetect==0.5.6.1 click decord==0.6.0
    theval weights stand-in --model syncnet --model s3fd --seed 0 --store STORE
    .venv/bin/python tests/data/parity/reference-env/run_latentsync_lse_reference.py \
        --latentsync LATENTSYNC_CHECKOUT --extra EXTRA --weights STORE \
        --clips tests/data/parity/clips/{astronaut_de_gt,tom_it_desync}.mp4 --out tests/data/parity/classic
"""
import argparse
import os
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from statistics import fmean

import oracle_files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latentsync", type=Path, required=True, help="a checkout of bytedance/LatentSync")
    ap.add_argument("--commit", default="a229c39")
    ap.add_argument("--extra", type=Path, required=True, help="the folder with scenedetect and decord")
    ap.add_argument("--weights", type=Path, required=True, help="a store with syncnet_v2.model and sfd_face.pth")
    ap.add_argument("--clips", type=Path, nargs="+", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    clips = [c.resolve() for c in args.clips]
    out_dir = args.out.resolve()
    work = Path(tempfile.mkdtemp(prefix="latentsync-oracle-"))
    code = work / "LatentSync"
    shutil.copytree(args.latentsync, code, ignore=shutil.ignore_patterns(".git", "assets", "checkpoints"))
    (code / "checkpoints" / "auxiliary").mkdir(parents=True)
    for name in ("syncnet_v2.model", "sfd_face.pth"):
        shutil.copy(args.weights / name, code / "checkpoints" / "auxiliary" / name)
    os.chdir(code)
    sys.path[:0] = [str(code), str(args.extra.resolve())]

    import cv2
    import torch

    from eval.eval_sync_conf import syncnet_eval
    from eval.syncnet import SyncNetEval
    from eval.syncnet_detect import SyncNetDetector

    torch.set_num_threads(2)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # eval_sync_conf.main's choice
    syncnet = SyncNetEval(device=device)
    syncnet.loadParameters("checkpoints/auxiliary/syncnet_v2.model")
    detector = SyncNetDetector(device=device, detect_results_dir="detect_results")
    rows = []
    for clip in clips:
        offset, conf = syncnet_eval(syncnet, detector, str(clip), "temp")
        crops = sorted(os.listdir(os.path.join("detect_results", "crop")))
        tracks = [syncnet.evaluate(video_path=os.path.join("detect_results", "crop", c), temp_dir="temp")
                  for c in crops]
        rows.append({"clip": clip.name, "offset": offset, "lse_c": repr(conf),
                     "lse_d": repr(fmean(d for _, d, _ in tracks)), "tracks": len(tracks),
                     "track_offsets": " ".join(str(o) for o, _, _ in tracks)})
        print(rows[-1], flush=True)
    oracle_files.write(out_dir, "latentsync_lse_oracle", rows, [
        f"bytedance/LatentSync {args.commit}: eval/eval_sync_conf.py syncnet_eval (and SyncNetEval.evaluate per "
        f"crop for LSE-D), unmodified, device {device}",
        f"torch {torch.__version__}, opencv {cv2.__version__}, scenedetect {version('scenedetect')}, "
        f"python_speech_features {version('python_speech_features')}, decord {version('decord')}, ffmpeg on PATH",
        *oracle_files.weights_sha256(args.weights)])
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
