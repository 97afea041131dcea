"""Reference detections of retina-face 0.0.17 (TensorFlow) on the parity clips, with the STAND-IN
retinaface.h5, for tests/unit/test_retinaface_net.py (which runs our torch detector, no TensorFlow).

Run with the venv that has retina-face 0.0.17, TensorFlow 2.17 and tf_keras 2.17 (ORACLE_MODELS_VENV,
tests/data/parity/reference-env/setup_models.sh), from the project's root:
    .venv/bin/theval weights stand-in --seed 0 --store STORE --model facexformer
    $ORACLE_MODELS_VENV/bin/python tests/reference_tools/retinaface_reference.py STORE/retinaface.h5
It decodes the first FRAMES frames of each clip with OpenCV, converts BGR->RGB as the reference
head_motion_dynamics.py does (its line 137), calls RetinaFace.detect_faces(frame) and writes every
returned face (score, facial_area, landmarks) plus a black frame's result to
tests/data/parity/models/retinaface_reference.json.
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU, as our test runs
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # what RetinaFace.py:7 sets, before tensorflow is imported

ROOT = Path(__file__).resolve().parents[2]
CLIPS = ("astronaut_de_gt", "t1left_de_gt", "t1center_en_gt", "tom_it_gt")
FRAMES = 12
OUT = ROOT / "tests/data/parity/models/retinaface_reference.json"


def frames(clip: str, n: int = FRAMES):
    import cv2

    cap = cv2.VideoCapture(str(ROOT / f"tests/data/parity/clips/{clip}.mp4"))
    for _ in range(n):
        ok, frame = cap.read()
        if not ok:
            break
        yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    cap.release()


def plain(faces: dict) -> dict:
    return {k: {"score": float(v["score"]), "facial_area": [int(x) for x in v["facial_area"]],
                "landmarks": {n: [float(c) for c in p] for n, p in v["landmarks"].items()}}
            for k, v in faces.items()}


def main(weights: str) -> None:
    import numpy as np

    home = Path(tempfile.mkdtemp(prefix="deepface-home-"))
    (home / ".deepface/weights").mkdir(parents=True)
    shutil.copy(weights, home / ".deepface/weights/retinaface.h5")
    os.environ["DEEPFACE_HOME"] = str(home)
    import retinaface
    import tensorflow as tf
    from retinaface import RetinaFace

    RetinaFace.build_model()  # loads the stand-in (tf_keras load_weights checks every shape)
    result = {"package": f"retina-face {retinaface.__version__}", "tensorflow": tf.__version__,
              "weights_sha256": hashlib.sha256(Path(weights).read_bytes()).hexdigest(),
              "frames_per_clip": FRAMES, "clips": {}, "seconds_per_frame": {}}
    for clip in CLIPS:
        out, times = [], []
        for frame in frames(clip):
            start = time.perf_counter()
            faces = RetinaFace.detect_faces(frame)
            times.append(time.perf_counter() - start)
            out.append(plain(faces))
        result["clips"][clip] = out
        result["seconds_per_frame"][clip] = round(float(np.median(times[1:])), 3)
    result["black_frame"] = plain(RetinaFace.detect_faces(np.zeros((512, 512, 3), np.uint8)))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    shutil.rmtree(home)
    print(f"wrote {OUT}: {sum(len(f) for c in result['clips'].values() for f in c)} faces;"
          f" s/frame {result['seconds_per_frame']}")


if __name__ == "__main__":
    main(sys.argv[1])
