"""classic(): the classic metrics of generated videos against the GT videos of the same file names,
as `theval classic` computes them (LMD-F/LMD-M, PSNR/SSIM; LSE-C/LSE-D and the AV offset when
SyncNet's weights are in the store), each model's means with bootstrap intervals over videos."""
from pathlib import Path

from theval_mesh.api.arguments import Models, model_pairs
from theval_mesh.pure.metrics import lse
from theval_mesh.studies.classic_metrics import ClassicRow, ClassicRun, run, write_outputs

__all__ = ["ClassicRow", "ClassicRun", "classic"]


def classic(gt: str | Path, generated: Models, out: str | Path | None = None, *, store: str | Path | None = None,
           lse_pipeline: str = lse.SYNCNET_PYTHON, source_image: str | Path | None = None,
           fid_variant: str = "pytorch-fid", fid_frames: str = "all", fvd_variant: str = "stylegan-v",
           all_variants: bool = False,
           hf_dataset: str | None = None,
           progress: bool = False) -> ClassicRun:
    """generated: {model: folder or video file} or [(model, path), ...]. Returns the ClassicRun:
    `rows` (a ClassicRow per generated video), `summary` (per model: means, "n:" counts, "CI low/high"
    bounds; FID and FVD: the set's value and its bootstrap interval over video pairs, NaN bounds
    from fewer than 2), `samples` ((model, "FID"|"FVD") -> generated and GT frames|clips, generated
    and GT videos, the interval's resamples), `provenance`, `skipped` (why a column is empty) and
    `to_latex()`. out: also write
    classic.csv, classic_summary.csv, classic.tex and classic.json there (and the summary into the
    folder's results.json when it is an evaluation's). lse_pipeline: "syncnet_python" (the published
    numbers' conversions; needs the ffmpeg program) or "in-process". source_image: CSIM's source
    identity (default: each GT video's first frame with a face). fid_variant: which implementation
    computes FID ("pytorch-fid", "clean-fid", "clean-fid-legacy-pytorch", "torchmetrics":
    docs/classic-metrics.md). fid_frames: the frames of each video FID takes: "all", "every:K",
    "count:N" (spread evenly) or "first:N". fvd_variant: which implementation computes FVD
    ("stylegan-v", "common-metrics-styleganv", "common-metrics-videogpt", "disco", "cd-fvd-i3d",
    "cd-fvd-videomae": docs/classic-metrics.md).
    all_variants: also every other variant's value per model (`variants`; with out,
    classic_variants.csv and .md). hf_dataset: with out, also each model's Hugging Face eval
    results for that Hub dataset."""
    result = run(model_pairs(generated), str(gt), store=store, progress=progress, lse_pipeline=lse_pipeline,
                 source_image=source_image, fid_variant=fid_variant, all_variants=all_variants,
                 fid_frames=fid_frames, fvd_variant=fvd_variant)
    if out is not None:
        write_outputs(result, out, hf_dataset=hf_dataset)
    return result
