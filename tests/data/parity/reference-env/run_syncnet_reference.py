"""LSE-C / LSE-D / AV offset by joonson/syncnet_python's OWN code, on stand-in weights.

Runs, unmodified, from a checkout of syncnet_python:
  - run_pipeline.py (ffmpeg re-encoding to 25 fps, frames as JPEG, S3FD face detection at conf 0.9
    and scale 0.25, scene detection with PySceneDetect, `track_shot`, `crop_video` to an XVID AVI
    with the track's audio);
  - SyncNetInstance.evaluate on each crop (ffmpeg extracts JPEG frames and 16 kHz audio; MFCC,
    SyncNet, the +-15 frame offset search).
Environment shims only, none touching what is computed: CPU instead of CUDA (`.cuda()` a no-op,
S3FD built with device "cpu" where run_pipeline.py asks for "cuda"), `np.int` restored for
S3FD's `nms_` (NumPy >= 1.24 removed it), and the stand-in `sfd_face.pth` copied to the path the
detector reads (detectors/s3fd/weights/, where download_model.sh puts it). A thin observer records
S3FD's boxes on every 10th frame (syncnet_oracle_boxes.csv).
`--detector blazeface` instead replaces the `detectors` package in sys.modules by MediaPipe's face
detector behind S3FD's interface (this project's detector when sfd_face.pth is absent).
LSE-D is the minimum of the mean distances over shifts (evaluate prints it as "Min dist"), LSE-C
the median minus it ("Confidence"), the offset evaluate's "AV offset".

Usage (Python 3.11 venv with torch, opencv-python, scipy, python_speech_features==0.6,
scenedetect==0.5.6.1, mediapipe==0.10.21; ffmpeg on PATH):
  python run_syncnet_reference.py --syncnet-repo SYNCNET_CHECKOUT --weights STORE \
      --clips CLIP.mp4 ... --out OUT_DIR [--detector s3fd|blazeface]
STORE holds `syncnet_v2.model` and `sfd_face.pth` (`theval weights stand-in --model syncnet
--model s3fd --seed 0`).
"""
import argparse
import csv
import hashlib
import os
import pickle
import runpy
import subprocess
import sys
import tempfile
import types
from importlib.metadata import version
from pathlib import Path

import numpy as np


class BlazeFaceAsS3FD:
    """S3FD's interface (detectors/s3fd/__init__.py `detect_faces(image, conf_th, scales)` -> (n, 5)
    x1, y1, x2, y2, score in the image's pixels) over MediaPipe's face detector."""

    def __init__(self, device="cpu"):
        import mediapipe as mp
        self.det = mp.solutions.face_detection.FaceDetection(model_selection=0, min_detection_confidence=0.5)

    def detect_faces(self, image, conf_th=0.8, scales=(1,)):
        h, w = image.shape[:2]
        out = []
        for d in self.det.process(image).detections or ():
            b = d.location_data.relative_bounding_box
            out.append((b.xmin * w, b.ymin * h, (b.xmin + b.width) * w, (b.ymin + b.height) * h, d.score[0]))
        return np.array(out, dtype=np.float64).reshape(-1, 5)


BOXES: list = []  # (clip, frame, x1, y1, x2, y2, score) of every 10th frame, as S3FD returned them


def use_s3fd(repo: Path, weights: Path):
    """syncnet_python's own detectors package, with the environment shims of the docstring."""
    target = repo / "detectors" / "s3fd" / "weights" / "sfd_face.pth"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((weights / "sfd_face.pth").read_bytes())
    np.int = int  # S3FD's nms_ (box_utils.py) uses the alias NumPy 1.24 removed
    import detectors
    init, detect = detectors.S3FD.__init__, detectors.S3FD.detect_faces

    def cpu_init(self, device="cuda"):
        init(self, device="cpu")

    def observed(self, image, conf_th=0.8, scales=(1,)):
        boxes = detect(self, image, conf_th=conf_th, scales=scales)
        self.frames = getattr(self, "frames", -1) + 1
        if self.frames % 10 == 0:
            BOXES.extend((CLIP[0], self.frames, *map(float, b)) for b in boxes)
        return boxes
    detectors.S3FD.__init__, detectors.S3FD.detect_faces = cpu_init, observed


CLIP = [""]


def run_pipeline(repo: Path, video: Path, data_dir: Path, reference: str, detector: str):
    if detector == "blazeface":
        shim = types.ModuleType("detectors")
        shim.S3FD = BlazeFaceAsS3FD
        sys.modules["detectors"] = shim
    CLIP[0] = reference
    argv = sys.argv
    sys.argv = ["run_pipeline.py", "--videofile", str(video), "--reference", reference, "--data_dir", str(data_dir)]
    try:
        runpy.run_path(str(repo / "run_pipeline.py"), run_name="__main__")
    finally:
        sys.argv = argv


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--syncnet-repo", required=True, type=Path)
    p.add_argument("--weights", required=True, type=Path)
    p.add_argument("--clips", required=True, nargs="+", type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--detector", choices=["s3fd", "blazeface"], default="s3fd")
    args = p.parse_args()
    args.syncnet_repo, args.weights, args.out = (x.resolve() for x in (args.syncnet_repo, args.weights, args.out))
    args.clips = [c.resolve() for c in args.clips]
    import torch
    torch.nn.Module.cuda = lambda self, *a, **k: self  # CPU only: their code calls .cuda()
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.set_num_threads(2)
    sys.path.insert(0, str(args.syncnet_repo))
    os.chdir(args.syncnet_repo)  # run_pipeline.py runs from the checkout (S3FD's weights path is relative)
    from SyncNetInstance import SyncNetInstance
    if args.detector == "s3fd":
        use_s3fd(args.syncnet_repo, args.weights)

    weights = args.weights / "syncnet_v2.model"
    net = SyncNetInstance()
    net.loadParameters(str(weights))
    rows = []
    for clip in args.clips:
        with tempfile.TemporaryDirectory() as tmp:
            data_dir = Path(tmp)
            ref = clip.stem
            run_pipeline(args.syncnet_repo, clip.resolve(), data_dir, ref, args.detector)
            with open(data_dir / "pywork" / ref / "tracks.pckl", "rb") as f:
                tracks = pickle.load(f)
            opt = types.SimpleNamespace(tmp_dir=str(data_dir / "pytmp"), reference=ref, batch_size=20, vshift=15)
            for i, track in enumerate(tracks):
                crop = data_dir / "pycrop" / ref / f"{i:05d}.avi"
                offset, conf, dists = net.evaluate(opt, videofile=str(crop))
                mdist = np.mean(np.stack(dists, 1), 1)
                rows.append({"clip": ref, "track": i, "first_frame": int(track["track"]["frame"][0]),
                             "last_frame": int(track["track"]["frame"][-1]), "windows": len(dists),
                             "offset": int(offset), "lse_d": repr(float(np.min(mdist))),
                             "lse_c": repr(float(conf))})
                print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.detector == "s3fd" else "_blazeface"
    with open(args.out / f"syncnet_oracle{suffix}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    if BOXES:
        with open(args.out / "syncnet_oracle_boxes.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["clip", "frame", "x1", "y1", "x2", "y2", "score"])
            w.writerows([c, k, *map(repr, b)] for c, k, *b in BOXES)
    ffmpeg = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.splitlines()[0]
    commit = subprocess.run(["git", "-C", str(args.syncnet_repo), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    notes = [f"syncnet_python {commit}", ffmpeg,
             *(f"{m} {version(m)}" for m in ("torch", "numpy", "scipy", "opencv-python", "scenedetect",
                                              "python_speech_features", "mediapipe")),
             *(f"weights {f} sha256 {hashlib.sha256((args.weights / f).read_bytes()).hexdigest()}"
               for f in ("syncnet_v2.model", "sfd_face.pth") if args.detector == "s3fd" or f != "sfd_face.pth"),
             f"detector {args.detector}",
             f"python {sys.version.split()[0]}", f"cwd-independent: data_dir in a temporary folder ({os.name})"]
    (args.out / f"syncnet_oracle{suffix}_notes.txt").write_text("\n".join(notes) + "\n")


if __name__ == "__main__":
    main()
