"""LSE-C / LSE-D / AV offset by Rudrabha/Wav2Lip's OWN evaluation code, on stand-in weights:
`evaluation/scores_LSE/calculate_scores_LRS.py`'s loop (the command its README gives for LRS2,
LRS3 and LRW) calling `SyncNetInstance_calc_scores.SyncNetInstance.evaluate` on each whole video.

Runs, unmodified, from checkouts of Wav2Lip and of joonson/syncnet_python (Wav2Lip's README copies
its scripts into a syncnet_python clone, whose SyncNetModel.py they import: both folders go on
sys.path here instead). evaluate extracts the video's own frames as JPEG (no 25 fps re-encoding,
no face detection), resizes each to 224x224 with cv2.resize, extracts 16 kHz mono audio, and
runs MFCC, SyncNet and the +-15 frame search. Environment shim only: CPU instead of CUDA
(`.cuda()` a no-op). evaluate returns (offset, confidence, min distance): LSE-C and LSE-D.

Usage (Python 3.11 venv with torch, opencv-python, scipy, python_speech_features==0.6; ffmpeg on PATH):
  python run_wav2lip_lse_reference.py --wav2lip-repo WAV2LIP_CHECKOUT --syncnet-repo SYNCNET_CHECKOUT \
      --weights STORE --clips CLIP.mp4 ... --out OUT_DIR
STORE holds `syncnet_v2.model` (`theval weights stand-in --model syncnet --seed 0`).
"""
import argparse
import subprocess
import sys
import tempfile
import types
from importlib.metadata import version
from pathlib import Path

import oracle_files


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wav2lip-repo", required=True, type=Path)
    p.add_argument("--syncnet-repo", required=True, type=Path)
    p.add_argument("--weights", required=True, type=Path)
    p.add_argument("--clips", required=True, nargs="+", type=Path)
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args()
    import torch
    torch.nn.Module.cuda = lambda self, *a, **k: self  # CPU only: their code calls .cuda()
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.set_num_threads(2)
    sys.path[:0] = [str((args.wav2lip_repo / "evaluation" / "scores_LSE").resolve()), str(args.syncnet_repo.resolve())]
    from SyncNetInstance_calc_scores import SyncNetInstance

    net = SyncNetInstance()
    net.loadParameters(str(args.weights / "syncnet_v2.model"))
    rows = []
    for clip in args.clips:
        with tempfile.TemporaryDirectory() as tmp:
            # calculate_scores_LRS.py's opt: batch 20, vshift 15, its tmp_dir, reference "demo"
            opt = types.SimpleNamespace(tmp_dir=tmp, reference="demo", batch_size=20, vshift=15)
            offset, conf, min_dist = net.evaluate(opt, videofile=str(clip.resolve()))
        rows.append({"clip": clip.stem, "offset": int(offset), "lse_d": repr(float(min_dist)),
                     "lse_c": repr(float(conf))})
        print(rows[-1], flush=True)
    ffmpeg = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.splitlines()[0]

    def commit(repo):
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    notes = [f"Wav2Lip {commit(args.wav2lip_repo)}", f"syncnet_python {commit(args.syncnet_repo)}", ffmpeg,
             *(f"{m} {version(m)}" for m in ("torch", "numpy", "scipy", "opencv-python-headless",
                                              "python_speech_features")),
             *(f"weights {line}" for line in oracle_files.weights_sha256(args.weights, ("syncnet_v2.model",))),
             f"python {sys.version.split()[0]}"]
    oracle_files.write(args.out, "wav2lip_lse_oracle", rows, notes)


if __name__ == "__main__":
    main()
