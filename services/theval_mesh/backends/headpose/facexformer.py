"""Head pose the reference's way: retina-face's box on each frame, FaceXFormer's head-pose output
on its crop (Newbyl/THEval 3603338, Naturalness/head_motion_dynamics.py, cited as hmd.py:LINE).

Per frame (`crop`): the RGB frame goes to the detector as the reference hands it to retina-face
(hmd.py:40-41; the package then treats it as BGR, retinaface_net.RetinaFaceDetector does the
same); the first face (`face_1`, the highest score) gives the box, already truncated to int by the
package; translation = the box centre in pixels (hmd.py:43-46); the crop is PIL's
`crop((int(x1), int(y1), int(x2), int(y2)))` of the RGB frame, resized to 224x224 with PIL's
bicubic filter (torchvision Resize on a PIL image, hmd.py:31-35, 47). Per batch (`angles`):
ToTensor, ImageNet normalisation, FaceXFormer task 2, radians * 180 / pi in float32 (hmd.py:57-67).
Frames go to the network in batches of 128 (hmd.py:27), as the reference batches them
(`PoseBatches`, shared by the embedded frame pass and the mesh's head-pose service).

The network runs in this process (`LocalNetwork`) or wherever an object with the same interface
sends it (rpc.triton.client.TritonFaceXFormer: a Triton model running LocalNetwork); the detector
always runs beside the crops.
"""
import numpy as np

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.liveness import check
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import HEADPOSE_MODELS
from theval_mesh.pure.errors import ServiceError, WeightsMissing

NAME = "facexformer"
BATCH = 128  # hmd.py:27
# On CPU a batch runs as forward passes of this many crops, per runtime (the network has no batch
# state: the same angles). Eager torch: 48 crops on 2 cores took 0.29 s each as one pass, 0.19 in
# passes of 8. OpenVINO and onnxruntime: one crop at a time is fastest (bench/network_speed.py:
# 4.22 crops/s against 3.99 in passes of 8 on OpenVINO).
CPU_PASS = {"torch": 8, "onnxruntime": 1, "openvino": 1}
CROP = 224
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # hmd.py:34
ROLES = ("main", "detector")
DETECTOR = "retinaface"  # the detector's name in the inference plan and the export cache
  # the registry's roles of FaceXFormer's files: the network, the detector


def _files(roles) -> dict[str, str]:
    """{role: file name} of FaceXFormer's files in the registry ("main": the network, "detector")."""
    return {f.where: f.name for f in HEADPOSE_MODELS[NAME].files if f.where in roles}


def missing(store, roles=ROLES) -> list[str]:
    """The files of `roles` absent from the store (the network's run elsewhere: ("detector",))."""
    root = ws.resolve(store)
    return [name for name in _files(roles).values() if not (root / name).is_file()]


def choose(mode: str, store, roles=ROLES) -> tuple[bool, str]:
    """(whether FaceXFormer estimates head pose, a one-line notice) for a --headpose mode; nothing
    is loaded. "facexformer" without its weights raises WeightsMissing. roles: the files this
    process needs (the network on Triton: the detector's only)."""
    from theval_mesh.backends.headpose.backend import RIGID_FIT

    absent = [] if mode == "rigid-fit" else missing(store, roles)
    if mode == "facexformer" and absent:
        raise WeightsMissing(f"--headpose facexformer needs {', '.join(absent)} in the weights store "
                             f"{ws.resolve(store)}; {ws.FETCH_HINT} (`theval weights status`)")
    if mode == "rigid-fit":
        return False, f"head pose: {RIGID_FIT}, an offline stand-in (requested)"
    if absent:
        return False, (f"head pose: {RIGID_FIT} stands in for FaceXFormer ({', '.join(absent)} not in "
                       f"{ws.resolve(store)}): head motion is not comparable with the reference's")
    return True, f"head pose: FaceXFormer on RetinaFace crops ({'requested' if mode == NAME else 'weights found'})"


def normalised(crops: list[np.ndarray]) -> np.ndarray:
    """(N, 3, 224, 224) float32 network input of 224x224x3 uint8 crops: ToTensor and ImageNet
    normalisation in torch, as the reference computes them (hmd.py:31-35, 57)."""
    import torch

    batch = np.stack(crops).transpose(0, 3, 1, 2)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return ((torch.from_numpy(batch).float().div(255.0) - mean) / std).numpy()


class LocalNetwork:
    """FaceXFormer's head-pose output in this process: degrees() of a normalised batch.
    inference: pure.inference.InferenceOptions (runtime, device, precision; default auto)."""
    served_by = "in-process"

    def __init__(self, store, inference=None):
        from theval_mesh.backends.headpose import facexformer_net
        from theval_mesh.backends.inference.plan import resolve

        self.store, self.plan = ws.resolve(store), resolve(inference).on(NAME)
        path = self.store / _files(("main",))["main"]
        sha = sha256_file(path)
        on_torch = self.plan.runtime == "torch"
        self.net = facexformer_net.load(path, self.plan.device if on_torch else "cpu").eval()
        if not on_torch:
            from theval_mesh.backends.inference.networks import facexformer_on_runtime
            self.net = facexformer_on_runtime(self.net, self.plan, self.store, sha)
        self.device = self.plan.device if on_torch else "cpu"  # where the input tensors go
        self.files = {path.name: (sha, ws.stand_in_seed(self.store, path.name, sha))}  # name -> (sha256, seed)

    def inference(self) -> dict:
        from theval_mesh.backends.inference.plan import describe
        return describe({NAME: self.plan})

    def degrees(self, batch: np.ndarray) -> np.ndarray:
        """(N, 3) float32 pitch, yaw, roll in degrees of a normalised (N, 3, 224, 224) batch; on
        CPU in forward passes of CPU_PASS crops (faster per crop, the same values)."""
        import torch

        step = CPU_PASS[self.plan.runtime] if self.plan.device == "cpu" else max(1, len(batch))
        with torch.inference_mode(), self.plan.autocast():
            radians = [self.net(torch.from_numpy(batch[i:i + step]).to(self.device)).float().cpu().numpy()
                       for i in range(0, len(batch), step)]
        return np.concatenate(radians) * 180 / np.pi if radians else np.zeros((0, 3), np.float32)  # hmd.py:65-67


class FaceXFormerHeadPose:
    """FaceXFormer + RetinaFace from the weights store; loads both on construction.
    network: where FaceXFormer runs (default: LocalNetwork, from the same store)."""
    batch = BATCH

    def __init__(self, store=None, inference=None, network=None):
        from theval_mesh.backends.headpose.retinaface_net import RetinaFaceDetector
        from theval_mesh.backends.inference.plan import resolve

        self.store = ws.resolve(store)
        self.plan = resolve(inference)
        absent = missing(self.store, ROLES if network is None else ("detector",))
        if absent:
            raise WeightsMissing(f"head pose (FaceXFormer) needs {', '.join(absent)} in the weights "
                                 f"store {self.store}; {ws.FETCH_HINT}")
        detector = self.store / _files(("detector",))["detector"]
        try:
            self.detector = RetinaFaceDetector(detector, plan=self.plan.on(DETECTOR), store=self.store)
            self.network = network if network is not None else LocalNetwork(self.store, inference)
        except ServiceError:  # a remote network that does not answer (yet): the caller decides
            raise
        except Exception as err:  # truncated file, wrong keys or shapes
            raise WeightsMissing(f"cannot load the head-pose weights from {self.store} "
                                 f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''});"
                                 " check them with `theval weights verify --model facexformer`") from err
        sha = sha256_file(detector)
        # name -> (sha256, stand-in seed or None): the network's files as it loaded them, the detector's here
        self.files = {**self.network.files, detector.name: (sha, ws.stand_in_seed(self.store, detector.name, sha))}
        self.served_by = self.network.served_by

    def describe(self) -> str:
        """Estimator, files and checksums; stand-in files named as such. The same wherever the
        network runs (where is served_by): GT and models scored either way compare."""
        parts = [f"{name}:sha256:{sha}" + ("" if seed is None else f" ({ws.stand_in_label(seed)})")
                 for name, (sha, seed) in self.files.items()]
        return f"{NAME} (retina-face 0.0.17 boxes, FaceXFormer head pose) " + " ".join(parts)

    def inference(self) -> dict:
        """How the detector (here) and FaceXFormer (here, or as its server reports) run."""
        from theval_mesh.backends.inference.plan import describe
        network = self.network.inference() if hasattr(self.network, "inference") else {}
        runtimes = {**(network.get("runtimes") or {}), **describe({DETECTOR: self.detector.plan})["runtimes"]}
        return {"device": self.plan.device, "precision": self.plan.precision, "runtimes": runtimes}

    def stand_in_seeds(self) -> set[int]:
        return {seed for _, seed in self.files.values() if seed is not None}

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
        out = []
        for start in range(0, len(crops), BATCH):
            check(cancelled)
            out.append(self.network.degrees(normalised(crops[start:start + BATCH])))
        return np.concatenate(out) if out else np.zeros((0, 3), np.float32)


class PoseBatches:
    """Each frame's face crop as it comes, the network on BATCH crops at a time (the reference's
    batches); only the 224x224 crops wait, never the frames. One row per frame added: pitch, yaw,
    roll (degrees), cx, cy (pixels), NaN where no face. backend: a FaceXFormerHeadPose;
    cancelled (backends.liveness) is checked per batch."""

    def __init__(self, backend, cancelled=None):
        self.backend, self.cancelled = backend, cancelled
        self.rows: list[list[float]] = []
        self.crops: list[np.ndarray] = []
        self.waiting: list[int] = []  # rows whose crop waits for its batch

    def add(self, index, frame: np.ndarray):
        found = self.backend.crop(frame)
        if found is None:
            self.rows.append([np.nan] * 5)
        else:
            crop, cx, cy = found
            self.waiting.append(len(self.rows))
            self.rows.append([np.nan, np.nan, np.nan, cx, cy])
            self.crops.append(crop)
        self.flush(final=False)

    def flush(self, final: bool):
        if self.crops and (final or len(self.crops) >= self.backend.batch):
            for row, angles in zip(self.waiting, self.backend.angles(self.crops, self.cancelled), strict=True):
                self.rows[row][:3] = angles
            self.crops, self.waiting = [], []

    def series(self) -> np.ndarray:
        return np.array(self.rows, dtype=np.float64).reshape(-1, 5)
