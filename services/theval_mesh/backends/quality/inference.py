"""Running a built pyiqa metric on images. Shared by the in-process backend and the Triton
python-backend models, so both paths compute every score the same way.

Images are RGB uint8 arrays (H x W x 3); the models see them as float in [0, 1], like
torchvision's ToTensor in the reference code."""
import numpy as np

NO_FACE = "No face detected"  # pyiqa's assertion when facexlib finds no face


def to_tensor(images):
    import torch
    batch = np.ascontiguousarray(np.stack(images).transpose(0, 3, 1, 2))
    return torch.from_numpy(batch).float().div_(255.0)


def score_batch(metric, images, device: str = "cpu") -> np.ndarray:
    """One forward pass over images of one size; float64 scores."""
    import torch
    with torch.no_grad():
        out = metric(to_tensor(images).to(device))
    return out.detach().cpu().reshape(-1).double().numpy()


def score_each(metric, images, device: str = "cpu") -> np.ndarray:
    """One image at a time, as the reference scores face quality; NaN where facexlib finds no
    face (the reference then drops the whole video, which is the caller's rule to apply)."""
    out = np.empty(len(images))
    for i, im in enumerate(images):
        try:
            out[i] = score_batch(metric, [im], device)[0]
        except AssertionError as err:
            if NO_FACE not in str(err):
                raise
            out[i] = np.nan
    return out


def score(metric, images, each: bool, device: str = "cpu") -> np.ndarray:
    """score_each if `each`, else one batch (images of mixed sizes go one at a time)."""
    if each:
        return score_each(metric, images, device)
    if len({im.shape for im in images}) == 1:
        return score_batch(metric, images, device)
    return np.concatenate([score_batch(metric, [im], device) for im in images])
