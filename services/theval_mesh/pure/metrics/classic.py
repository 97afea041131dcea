"""Classic metrics of the paper's Table 2, for comparison with THEval: LMD-F, LMD-M, PSNR, SSIM,
and the Fréchet distance behind FID/FVD. Pure: arrays in, numbers out (`studies/classic_metrics.py` decodes,
pairs the frames and runs FaceMesh).
"""
import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from theval_mesh.pure.metrics.landmark_sets import LIPS
from theval_mesh.pure.scoring.tables import CI_HIGH, CI_LOW, COUNT_PREFIX, latex_escape, tex_number

# Summary columns, named as in the paper's Table 2 (what `theval align` reads as per-model scores).
LMD_F, LMD_M, PSNR, SSIM, LSE_C, LSE_D, FID, FVD, CSIM, CSIM_DRIFT, AKD, AED = COLUMNS = (
    "LMD-F", "LMD-M", "PSNR", "SSIM", "LSE-C", "LSE-D", "FID", "FVD", "CSIM", "CSIM drift", "AKD", "AED")
# The paper's table (data/published_human_correlation.csv) calls the mouth LMD "LMD-L" (lips).
PUBLISHED_NAMES = {LMD_M: "LMD-L"}
# A paper's column order (the THEval paper's: LSE-C, LSE-D, FVD, FID, LMD-F, LMD-L), then PSNR, SSIM,
# the identity similarity CSIM and its drift over the video (pure/metrics/identity.py), and
# head reenactment's AKD and AED as First Order Motion Model's evaluation computes them
# (pure/metrics/akd.py, aed.py: its AED is an identity distance).
TABLE_ORDER = (LSE_C, LSE_D, FVD, FID, LMD_F, LMD_M, PSNR, SSIM, CSIM, CSIM_DRIFT, AKD, AED)
HIGHER_IS_BETTER = {LSE_C: True, LSE_D: False, FVD: False, FID: False, LMD_F: False, LMD_M: False,
                    PSNR: True, SSIM: True, CSIM: True, CSIM_DRIFT: False, AKD: False, AED: False}

# Landmarks are compared in pixels of a 256x256 frame, as the project's lip metrics measure them
# (docs/metrics.md): FaceMesh's normalised x, y times 256. A generated video at another resolution than
# its GT is then compared on the same scale, and LMD values are comparable across datasets.
LMD_SIZE = 256
MOUTH_POINTS = LIPS
# A frame identical to the GT has infinite PSNR; capped (the usual convention of SR and
# talking-head code) so that one copied frame cannot make a video's mean infinite. 100 dB is an
# MSE of 6.5e-6 levels^2: nothing a viewer or a model comparison can tell apart from identical.
PSNR_CAP_DB = 100.0


@dataclass(frozen=True)
class LandmarkDistances:
    lmd_f: float        # mean L2 over all points and paired frames, 256-scale px (NaN: no frame)
    lmd_m: float        # the same over the mouth (LIPS) points
    frames_paired: int  # frames compared: up to the shorter video
    frames_skipped: int  # of those, frames without a face on one side or both (not in LMD)


def landmark_distances(generated: np.ndarray, gt: np.ndarray) -> LandmarkDistances:
    """generated, gt: (T, N, 2 or 3) FaceMesh points normalised to [0, 1], NaN rows where no face;
    frames are paired by index up to the shorter series. Only x and y count: FaceMesh's z is a
    relative depth without a pixel scale."""
    n = min(len(generated), len(gt))
    gen_px = np.asarray(generated, np.float64)[:n, :, :2] * LMD_SIZE
    gt_px = np.asarray(gt, np.float64)[:n, :, :2] * LMD_SIZE
    both = ~np.isnan(gen_px[:, 0, 0]) & ~np.isnan(gt_px[:, 0, 0])
    if not both.any():
        return LandmarkDistances(math.nan, math.nan, n, n)
    dist = np.linalg.norm(gen_px[both] - gt_px[both], axis=-1)  # (frames, points)
    return LandmarkDistances(float(dist.mean()), float(dist[:, list(MOUTH_POINTS)].mean()),
                             n, int(n - both.sum()))


def psnr(generated: np.ndarray, gt: np.ndarray) -> float:
    """PSNR (dB) of one RGB uint8 frame against its GT frame of the same size, capped."""
    from skimage.metrics import peak_signal_noise_ratio  # scikit-image only where frames are compared

    with np.errstate(divide="ignore"):  # identical frames: log10 of infinity, then the cap
        value = peak_signal_noise_ratio(gt, generated, data_range=255)
    return float(min(value, PSNR_CAP_DB))


def ssim(generated: np.ndarray, gt: np.ndarray) -> float:
    """SSIM of one RGB uint8 frame against its GT frame of the same size (scikit-image's defaults:
    7x7 uniform window, the mean over the three channels)."""
    from skimage.metrics import structural_similarity

    return float(structural_similarity(gt, generated, channel_axis=-1, data_range=255))


def gaussian_stats(features: np.ndarray, ddof: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of the rows of `features`, in float64. ddof=1: the unbiased covariance
    pytorch-fid takes (np.cov); ddof=0: the biased one StyleGAN-V's FVD takes (FeatureStats
    .get_mean_cov divides by N)."""
    x = np.asarray(features, np.float64)
    if x.ndim != 2 or len(x) < 1 + ddof:
        raise ValueError(f"need a (N, D) feature array with N > {ddof}, got shape {x.shape}")
    return x.mean(0), np.atleast_2d(np.cov(x, rowvar=False, ddof=ddof))


def feature_stats_moments(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and biased covariance as StyleGAN-V's FeatureStats.get_mean_cov computes them (cd-fvd
    keeps its copy): the float32 rows summed in float64, mean = sum x / N, covariance = sum x x^T / N
    - mean mean^T (raw moments: gaussian_stats(ddof=0) centres first, equal to rounding)."""
    x = np.asarray(features, np.float32).astype(np.float64)
    if x.ndim != 2 or len(x) < 1:
        raise ValueError(f"need a (N, D) feature array with N > 0, got shape {x.shape}")
    mean = x.sum(0) / len(x)
    return mean, x.T @ x / len(x) - np.outer(mean, mean)


FRAME_SAMPLINGS = ("all", "every:K", "count:N", "first:N")  # FID's frames of each video


def fid_frame_indices(n: int, sampling: str = "all") -> list[int]:
    """The frames of an n-frame video that FID uses, by the conventions talking-head papers state:
    "all" (every frame), "every:K" (frames 0, K, 2K, ...), "count:N" (N frames spread evenly from
    the first to the last, np.linspace(0, n - 1, N) truncated; every frame of a shorter video) or
    "first:N". ValueError names the accepted forms."""
    kind, _, value = sampling.partition(":")
    if kind == "all" and not value:
        return list(range(n))
    if kind in ("every", "count", "first") and value.isdigit() and int(value) > 0:
        k = int(value)
        if kind == "every":
            return list(range(0, n, k))
        if kind == "first" or n <= k:
            return list(range(min(n, k)))
        return np.linspace(0, n - 1, k).astype(int).tolist()
    raise ValueError(f"FID frame sampling {sampling!r}: one of {', '.join(FRAME_SAMPLINGS)} (K, N > 0)")


def frechet_distance_stats(mu1: np.ndarray, s1: np.ndarray, mu2: np.ndarray, s2: np.ndarray,
                           eps: float = 1e-6, imaginary_atol: float | None = 1e-3) -> float:
    """||mu1 - mu2||^2 + Tr(s1 + s2 - 2 sqrt(s1 s2)), as pytorch-fid's calculate_frechet_distance:
    when sqrtm(s1 s2) is not finite (a singular product), eps is added to both diagonals and the
    root taken again; the real part of the root is kept, and (imaginary_atol not None) a diagonal
    imaginary part above imaginary_atol raises ValueError as pytorch-fid does. None: keep the real
    part whatever (StyleGAN-V's FVD, np.real).

    Fewer samples than dimensions (N <= D, the usual case here: 2048 Inception features, a few
    hundred frames) makes both covariances singular (rank <= N - 1). sqrtm then usually still
    returns a finite root with a small imaginary part from rounding on the zero eigenvalues of
    s1 s2, so nothing is nudged and the value is well defined, but it is a BIASED estimate: FID
    and FVD fall as N grows. Compare values only at equal sample sizes."""
    mu1, mu2 = np.atleast_1d(mu1), np.atleast_1d(mu2)
    s1, s2 = np.atleast_2d(s1), np.atleast_2d(s2)
    if mu1.shape != mu2.shape or s1.shape != s2.shape:
        raise ValueError(f"feature sizes differ: {mu1.shape} vs {mu2.shape}")
    covmean = scipy.linalg.sqrtm(s1 @ s2)
    if not np.isfinite(covmean).all():  # singular product: nudge the diagonals, as pytorch-fid
        offset = np.eye(len(s1)) * eps
        covmean = scipy.linalg.sqrtm((s1 + offset) @ (s2 + offset))
    if np.iscomplexobj(covmean):
        if imaginary_atol is not None and not np.allclose(np.diagonal(covmean).imag, 0, atol=imaginary_atol):
            raise ValueError(f"Fréchet distance: sqrt(s1 s2) has an imaginary component "
                             f"{np.max(np.abs(covmean.imag)):.3g} (pytorch-fid refuses it too)")
        covmean = covmean.real
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def frechet_distance(a: np.ndarray, b: np.ndarray, eps: float = 1e-6) -> float:
    """Fréchet distance between Gaussians fitted to two sets of features (rows): FID on Inception
    features of frames. As pytorch-fid computes it (unbiased covariances, `frechet_distance_stats`)."""
    return frechet_distance_stats(*gaussian_stats(a), *gaussian_stats(b), eps=eps)


def frechet_distance_torchmetrics(fake: np.ndarray, real: np.ndarray) -> float:
    """FID as torchmetrics 1.9.0's FrechetInceptionDistance.compute gives it: each set's mean and
    unbiased covariance from the float64 sums it accumulates (sum x, sum x x^T), then
    ||mu_r - mu_f||^2 + tr S_r + tr S_f - 2 sum Re sqrt(eig(S_r S_f)) (no square root of a matrix,
    so neither pytorch-fid's nudge nor its refusal), returned in the features' float32."""
    stats = []
    for x in (real, fake):
        x = np.asarray(x, np.float64)
        if x.ndim != 2 or len(x) < 2:
            raise ValueError(f"torchmetrics' FID needs more than one sample per set, got shape {x.shape}")
        mu = x.sum(0) / len(x)
        stats.append((mu, (x.T @ x - len(x) * np.outer(mu, mu)) / (len(x) - 1)))
    (mu_r, s_r), (mu_f, s_f) = stats
    cross = np.sqrt(np.linalg.eigvals(s_r @ s_f).astype(complex)).real.sum()
    diff = mu_r - mu_f
    return float(np.float32(diff @ diff + np.trace(s_r) + np.trace(s_f) - 2 * cross))


def _weighted_centred(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(mean, rows centred on it and scaled by sqrt(weight), total weight) of the rows of x, each
    counted w times (rows drawn 0 times drop). Only called with a positive total weight."""
    keep = np.asarray(w) > 0
    x, w = np.asarray(x, np.float64)[keep], np.asarray(w, np.float64)[keep]
    n = w.sum()
    mu = w @ x / n
    return mu, (x - mu) * np.sqrt(w)[:, None], n


def frechet_distance_weighted(a: np.ndarray, wa: np.ndarray, b: np.ndarray, wb: np.ndarray,
                              ddof: int = 1) -> float:
    """The Fréchet distance between Gaussians fitted to the rows of a and b, row i counted wa[i]
    (wb[i]) times, as a bootstrap resample draws them; ddof as gaussian_stats (1: FID, 0: FVD).

    Exact and cheap without a d x d square root: with the centred, weight-scaled rows A and B and
    covariances S1 = AᵀA/c1, S2 = BᵀB/c2 (c = N - ddof), the eigenvalues of S1 S2 are the squared
    singular values of A Bᵀ over c1 c2, so tr sqrt(S1 S2) = ||A Bᵀ||_* / sqrt(c1 c2): an
    n1 x n2 SVD when there are fewer rows than dimensions, else the d x d symmetric route
    tr sqrt(S1^½ S2 S1^½). Real and non-negative by construction, so it needs neither
    pytorch-fid's nudge nor its imaginary-part check; on the point estimate it agrees with
    frechet_distance_stats to rounding (a test checks)."""
    if np.sum(wa) - ddof <= 0 or np.sum(wb) - ddof <= 0:  # a resample of only frameless videos
        return math.nan
    mu1, x, n1 = _weighted_centred(a, wa)
    mu2, y, n2 = _weighted_centred(b, wb)
    c1, c2 = n1 - ddof, n2 - ddof
    if min(len(x), len(y)) <= x.shape[1]:
        cross = np.linalg.svd(x @ y.T, compute_uv=False).sum() / math.sqrt(c1 * c2)
    else:
        s1, s2 = x.T @ x / c1, y.T @ y / c2
        vals, vecs = np.linalg.eigh(s1)
        root = (vecs * np.sqrt(np.clip(vals, 0, None))) @ vecs.T
        cross = np.sqrt(np.clip(np.linalg.eigvalsh(root @ s2 @ root), 0, None)).sum()
    diff = mu1 - mu2
    return float(diff @ diff + (x * x).sum() / c1 + (y * y).sum() / c2 - 2 * cross)


def pair_resample_distance(a: np.ndarray, gen_rows, b: np.ndarray, gt_rows, gt_index, ddof: int = 1):
    """statistic(counts) for a bootstrap over video pairs: the Fréchet distance when generated
    video i (rows gen_rows[i] of a, in order) is drawn counts[i] times, its frames (clips) with it,
    and its GT video (gt_index[i]: rows gt_rows[j] of b) with it. A GT video several generated
    videos pair with is in the point estimate once, so it counts the mean draw count of its pairs:
    all-ones counts give the point estimate, and a pair drawn twice counts twice."""
    gen_rows, gt_rows, gt_index = (np.asarray(v, int) for v in (gen_rows, gt_rows, gt_index))
    pairs_per_gt = np.bincount(gt_index, minlength=len(gt_rows))

    def statistic(counts) -> float:
        counts = np.asarray(counts, float)
        gt_counts = np.bincount(gt_index, weights=counts, minlength=len(gt_rows)) / np.maximum(pairs_per_gt, 1)
        return frechet_distance_weighted(a, np.repeat(counts, gen_rows), b, np.repeat(gt_counts, gt_rows), ddof)
    return statistic


def summary_row(model: str, values: dict, intervals: dict | None = None) -> dict:
    """One model's summary: the mean of each column over its videos (NaN ignored, NaN when none),
    then "n:<column>" counts of the values behind each mean (the project's count columns), then
    "<column> CI low" / "CI high": the bootstrap interval of each mean (intervals: column -> (low,
    high); NaN bounds where there is none, e.g. a set-level FID)."""
    row = {"Model": model}
    counts, bounds = {}, {}
    for column in COLUMNS:
        finite = [v for v in values.get(column, ()) if not math.isnan(v)]
        row[column] = float(np.mean(finite)) if finite else math.nan
        counts[COUNT_PREFIX + column] = len(finite)
        low, high = (intervals or {}).get(column, (math.nan, math.nan))
        bounds[column + CI_LOW], bounds[column + CI_HIGH] = low, high
    return {**row, **counts, **bounds}


def summary_latex(summary: list[dict], notes: list[str], decimals: int = 3) -> str:
    """The classic metrics as a booktabs tabular in TABLE_ORDER, arrows for the better direction,
    each cell "mean $\\pm$ half-width" of its bootstrap interval, the best model per column in bold,
    "--" without a value. notes: comment lines above it (provenance, sample sizes, stand-ins)."""
    summary = [{c: math.nan for c in COLUMNS} | row for row in summary]
    columns = [c for c in TABLE_ORDER if any(not math.isnan(r[c]) for r in summary)] or list(TABLE_ORDER)
    best = {}
    for c in columns:
        shown = [round(r[c], decimals) for r in summary if not math.isnan(r[c])]
        best[c] = (max if HIGHER_IS_BETTER[c] else min)(shown) if shown else None

    def cell(row, c):
        if math.isnan(row[c]):
            return "--"
        text = tex_number(row[c], decimals)
        low, high = row.get(c + CI_LOW, math.nan), row.get(c + CI_HIGH, math.nan)
        if not (math.isnan(low) or math.isnan(high)):
            text += r" $\pm$ " + tex_number((high - low) / 2, decimals)
        return rf"\textbf{{{text}}}" if len(summary) > 1 and round(row[c], decimals) == best[c] else text

    arrows = {True: r"$\uparrow$", False: r"$\downarrow$"}
    lines = ["% Classic metrics (theval classic). Needs \\usepackage{booktabs}.",
             "% Each cell: the mean over a model's videos $\\pm$ half-width of its 95 % percentile bootstrap "
             "interval over videos; bold: the best model per column; --: no value.",
             *(["% FID, FVD: the set's value $\\pm$ half-width of its bootstrap interval over video pairs; biased "
                "upward with few videos, which the interval does not correct (its bounds in the notes below)."]
               if FID in columns or FVD in columns else []),
             *(f"% {' '.join(n.split())}" for n in notes),
             r"\begin{tabular}{l" + "c" * len(columns) + "}", r"\toprule",
             " & ".join(["Model", *(f"{latex_escape(PUBLISHED_NAMES.get(c, c))} {arrows[HIGHER_IS_BETTER[c]]}"
                                    for c in columns)]) + r" \\", r"\midrule"]
    lines += [" & ".join([latex_escape(r["Model"]), *(cell(r, c) for c in columns)]) + r" \\" for r in summary]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def variant_spread(values: list[float], default: float) -> float:
    """How far a metric's implementations disagree on one model: (max - min) over |the default
    variant's value|; NaN without two values or with a default of 0 or none."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2 or not math.isfinite(default) or default == 0:
        return math.nan
    return (max(finite) - min(finite)) / abs(default)


def variants_markdown(variants: dict, follows: dict, defaults: dict, decimals: int = 4) -> str:
    """One Markdown table per metric of the --all-variants values: a row per model, a column per
    variant (the default first, marked), and the spread (variant_spread, in %). variants:
    (model, column, variant) -> value; follows: variant -> the code it follows; defaults: column ->
    the variant the run's columns use."""
    out = []
    for column in dict.fromkeys(c for _, c, _ in variants):
        names = [defaults[column]] + sorted({v for _, c, v in variants if c == column} - {defaults[column]})
        models = list(dict.fromkeys(m for m, c, _ in variants if c == column))
        out += [f"### {column}", "", "| model | " + " | ".join(
            f"{v}{' (default)' if v == defaults[column] else ''}" for v in names) + " | spread |",
                "|---" * (len(names) + 2) + "|"]
        for model in models:
            row = [variants.get((model, column, v), math.nan) for v in names]
            spread = variant_spread(row, row[0])
            cells = ["--" if math.isnan(v) else f"{v:.{decimals}g}" for v in row]
            out.append(f"| {model} | " + " | ".join(cells) + " | " + ("--" if math.isnan(spread) else f"{spread:.2%}")
                       + " |")
        out += [""] + [f"- {v}: {follows.get(v, v)}" for v in names] + [""]
    return "\n".join(out)
