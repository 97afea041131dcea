"""Point-set geometry shared by the head pose (3-D face shapes) and face alignment (2-D points)."""
import numpy as np


def umeyama(src: np.ndarray, dst: np.ndarray):
    """Similarity (s, R, t) minimising |dst - (s R src + t)|^2 for (K, D) point sets, no reflection."""
    src, dst = np.asarray(src, float), np.asarray(dst, float)
    mu_s, mu_d = src.mean(0), dst.mean(0)
    a, b = src - mu_s, dst - mu_d
    u, sig, vt = np.linalg.svd(b.T @ a / len(src))
    d = np.ones(src.shape[1])
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        d[-1] = -1
    r = u @ np.diag(d) @ vt
    s = (sig * d).sum() / a.var(0).sum()
    return s, r, mu_d - s * r @ mu_s
