"""Head pose the reference's way: retina-face's box on each frame, FaceXFormer's head-pose output
on its crop (Newbyl/THEval 3603338, Naturalness/head_motion_dynamics.py, cited as hmd.py:LINE).

Per frame (`crop`): the RGB frame goes to the detector as the reference hands it to retina-face
(hmd.py:40-42; the package then treats it as BGR, retinaface_net.RetinaFaceDetector does the
same); the first face (`face_1`, the highest score) gives the box, already truncated to int by the
package; translation = the box centre in pixels (hmd.py:45); the crop is PIL's
`crop((int(x1), int(y1), int(x2), int(y2)))` of the RGB frame, resized to 224x224 with PIL's
bicubic filter (torchvision Resize on a PIL image, hmd.py:31-35, 46). Per batch (`angles`):
ToTensor, ImageNet normalisation, FaceXFormer task 2, radians * 180 / pi in float32 (hmd.py:53-67).
Frames go to the network in batches of 128 (hmd.py:26), as the reference batches them.
"""
from pathlib import Path

import numpy as np

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.liveness import check
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import HEADPOSE_MODELS
from theval_mesh.pure.errors import WeightsMissing

NAME = "facexformer"
BATCH = 128  # hmd.py:26
CROP = 224
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # hmd.py:34


def missing(store) -> list[str]:
    return ws.missing_files(store, [NAME])


def choose(mode: str, store) -> tuple[bool, str]:
    """(whether FaceXFormer estimates head pose, a one-line notice) for a --headpose mode; nothing
    is loaded. "facexformer" without its weights raises WeightsMissing."""
    from theval_mesh.backends.headpose.backend import RIGID_FIT

    absent = [] if mode == "rigid-fit" else missing(store)
    if mode == "facexformer" and absent:
        raise WeightsMissing(f"--headpose facexformer needs {', '.join(absent)} in the weights store "
                             f"{ws.resolve(store)}; {ws.FETCH_HINT} (`theval weights status`)")
    if mode == "rigid-fit":
        return False, f"head pose: {RIGID_FIT}, an offline stand-in (requested)"
    if absent:
        return False, (f"head pose: {RIGID_FIT} stands in for FaceXFormer ({', '.join(absent)} not in "
                       f"{ws.resolve(store)}): head motion is not comparable with the reference's")
    return True, f"head pose: FaceXFormer on RetinaFace crops ({'requested' if mode == NAME else 'weights found'})"


class FaceXFormerHeadPose:
    """FaceXFormer + RetinaFace from the weights store; loads both on construction."""
    batch = BATCH

    def __init__(self, store=None, device: str = "cpu"):
        from theval_mesh.backends.headpose import facexformer_net
        from theval_mesh.backends.headpose.retinaface_net import RetinaFaceDetector

        self.store, self.device = ws.resolve(store), device
        absent = missing(self.store)
        if absent:
            raise WeightsMissing(f"head pose (FaceXFormer) needs {', '.join(absent)} in the weights "
                                 f"store {self.store}; {ws.FETCH_HINT}")
        files = {f.where: self.store / f.name for f in HEADPOSE_MODELS[NAME].files}
        self.files = {p.name: sha256_file(p) for p in files.values()}
        try:
            self.detector = RetinaFaceDetector(files["detector"])
            self.net = facexformer_net.load(files["main"], device).eval()
        except Exception as err:  # truncated file, wrong keys or shapes
            raise WeightsMissing(f"cannot load the head-pose weights from {self.store} "
                                 f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''});"
                                 " check them with `theval weights verify --model facexformer`") from err

    def describe(self) -> str:
        """Estimator, files and checksums; stand-in files named as such."""
        parts = []
        for name, sha in self.files.items():
            seed = ws.stand_in_seed(self.store, name, sha)
            parts.append(f"{name}:sha256:{sha}" + ("" if seed is None else f" ({ws.stand_in_label(seed)})"))
        return f"{NAME} (retina-face 0.0.17 boxes, FaceXFormer head pose) " + " ".join(parts)

    def stand_in_seeds(self) -> set[int]:
        seeds = {ws.stand_in_seed(self.store, n, s) for n, s in self.files.items()}
        return {s for s in seeds if s is not None}

    def crop(self, frame: np.ndarray):
        """(224x224x3 uint8 crop, cx, cy) of the frame's first face, or None without one."""
        from PIL import Image

        faces = self.detector.detect(frame)
        if not faces:
            return None
        x1, y1, x2, y2 = faces["face_1"]["facial_area"]
        if x2 <= x1 or y2 <= y1:  # PIL cannot resize an empty crop: the reference fails the video
            return None
        image = Image.fromarray(frame)
        face = image.crop((int(x1), int(y1), int(x2), int(y2))).resize((CROP, CROP), Image.Resampling.BICUBIC)
        return np.asarray(face), (x1 + x2) / 2, (y1 + y2) / 2

    def angles(self, crops: list[np.ndarray], cancelled=None) -> np.ndarray:
        """(N, 3) float32 pitch, yaw, roll in degrees of 224x224 crops, BATCH at a time."""
        import torch

        out = []
        mean = torch.tensor(MEAN).view(1, 3, 1, 1)
        std = torch.tensor(STD).view(1, 3, 1, 1)
        for start in range(0, len(crops), BATCH):
            check(cancelled)
            batch = np.stack(crops[start:start + BATCH]).transpose(0, 3, 1, 2)
            x = (torch.from_numpy(batch).float().div(255.0) - mean) / std
            with torch.inference_mode():
                radians = self.net(x.to(self.device)).cpu().numpy()
            out.append(radians * 180 / np.pi)  # float32, as hmd.py:63-65
        return np.concatenate(out) if out else np.zeros((0, 3), np.float32)
