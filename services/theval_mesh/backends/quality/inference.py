"""Running a built pyiqa metric on images. Shared by the in-process backend and the Triton
python-backend models, so both paths compute every score the same way.

Images are RGB uint8 arrays (H x W x 3); the models see them as float in [0, 1], like
torchvision's ToTensor in the reference code."""
import numpy as np

from theval_mesh.backends.inference.plan import TORCH_CPU

NO_FACE = "No face detected"  # pyiqa's assertion when facexlib finds no face
# On CPU a batch runs as forward passes of at most this many images, per runtime: the same images,
# faster per image (no batch-level state, so the scores are the reference's batch-of-64 scores to
# float rounding). Eager torch: topiq_iaa, 24 frames of 512 px on 2 cores, 0.89 s/frame as one
# pass, 0.66 in passes of 4. OpenVINO and onnxruntime: one image at a time is fastest
# (bench/network_speed.py: topiq_iaa 1.55 images/s one at a time against 1.40 in passes of 4 on
# OpenVINO, musiq 7.98 against 5.54).
CPU_PASS = {"torch": 4, "onnxruntime": 1, "openvino": 1}


def to_tensor(images):
    import torch
    batch = np.ascontiguousarray(np.stack(images).transpose(0, 3, 1, 2))
    return torch.from_numpy(batch).float().div_(255.0)


def score_batch(metric, images, plan=TORCH_CPU) -> np.ndarray:
    """Images of one size, in one forward pass (on CPU, passes of CPU_PASS); float64 scores.
    plan: backends.inference.plan.NetworkPlan (torch's tensors stay on the CPU when another
    runtime runs the network: it takes numpy arrays)."""
    import torch
    device = plan.device if plan.runtime == "torch" else "cpu"
    step = CPU_PASS[plan.runtime] if plan.device == "cpu" else max(1, len(images))
    out = []
    with torch.no_grad(), plan.autocast():
        for start in range(0, len(images), step):
            out.append(metric(to_tensor(images[start:start + step]).to(device)).detach().float().cpu().reshape(-1))
    return torch.cat(out).double().numpy() if out else np.zeros(0)


def score_each(metric, images, plan=TORCH_CPU) -> np.ndarray:
    """One image at a time, as the reference scores face quality; NaN where facexlib finds no
    face (the reference then drops the whole video, which is the caller's rule to apply)."""
    out = np.empty(len(images))
    for i, im in enumerate(images):
        try:
            out[i] = score_batch(metric, [im], plan)[0]
        except AssertionError as err:
            if NO_FACE not in str(err):
                raise
            out[i] = np.nan
    return out


def score(metric, images, each: bool, plan=TORCH_CPU) -> np.ndarray:
    """score_each if `each`, else one batch (images of mixed sizes go one at a time)."""
    if each:
        return score_each(metric, images, plan)
    if len({im.shape for im in images}) == 1:
        return score_batch(metric, images, plan)
    return np.concatenate([score_batch(metric, [im], plan) for im in images])
