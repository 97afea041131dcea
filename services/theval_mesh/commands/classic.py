"""`theval classic`: the paper's Table 2 classic metrics (LMD-F, LMD-M, PSNR, SSIM; LSE-C/LSE-D, FID
and FVD when their networks' weights are in the store) of generated videos against GT videos."""
from theval_mesh.pure.exit_codes import EXIT_OK, EXIT_PARTIAL
from theval_mesh.pure.metrics import lse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "classic", aliases=["legacy"], help="the usual talking-head metrics beside THEval's (LSE-C/D, FID, FVD, LMD, PSNR, SSIM)",
        description="Compare each generated video with the GT video of the same file name: LMD-F and "
                    "LMD-M (FaceMesh landmarks, 256-scale px), PSNR and SSIM, frames paired by index "
                    "up to the shorter video; LSE-C/LSE-D and the AV offset (SyncNet, syncnet_python's "
                    "pipeline), CSIM (ArcFace identity similarity to the source), AKD (face-alignment's "
                    "68 landmarks against the GT's) and AED (OpenFace identity embeddings against the GT's; "
                    "both pose-evaluation's way) per generated video; FID "
                    "(pytorch-fid by default: --fid-variant) and FVD (StyleGAN-V's by default: --fvd-variant) per model. "
                    "A metric whose network weights are not in the weights store is empty, with the reason.")
    p.add_argument("--generated", required=True, nargs="+", action="extend", metavar="DIR_OR_FILE",
                   help="folders (one model each) or video files of generated videos")
    p.add_argument("--gt", required=True, metavar="DIR", help="folder of the GT videos, same file names")
    p.add_argument("--out", default="classic_results", metavar="DIR",
                   help="output folder for classic.csv and classic_summary.csv (default: ./classic_results)")
    p.add_argument("--model", action="append", metavar="NAME",
                   help="model name (default: the folder's name); once for all --generated paths, or "
                        "once per path in the same order")
    p.add_argument("--store", metavar="DIR", help="weights store directory (default: $THEVAL_WEIGHTS, "
                                                  "else ~/.cache/theval/weights)")
    p.add_argument("--lse-pipeline", choices=lse.PIPELINES, default=lse.SYNCNET_PYTHON,
                   help="syncnet_python (default): its ffmpeg re-encodings, JPEG frames and XVID crops, as the "
                        "published LSE numbers (needs the ffmpeg program); in-process: the decoded pixels, "
                        "nothing re-encoded (faster; NOT comparable with published LSE); wav2lip-lrs: Wav2Lip's "
                        "calculate_scores_LRS.py, whole frames resized to 224x224, no face detection; latentsync: "
                        "LatentSync's eval_sync_conf.py, syncnet_python's steps in MP4 with AAC audio, tracks from 51 "
                        "frames; mochabench: MoChaBench's SyncNetPipeline, the speech straight from the video, the "
                        "best track's values")
    p.add_argument("--source-image", metavar="IMAGE",
                   help="CSIM: the source identity for every video (default: each GT video's first frame with a face)")
    p.add_argument("--fid-variant", choices=list(fid_variants()), default="pytorch-fid",
                   help="the implementation that computes FID: " + "; ".join(
                       f"{name}: {follows}" for name, follows in fid_variants().items()) + " (default: pytorch-fid)")
    p.add_argument("--fvd-variant", choices=list(fvd_variants()), default="stylegan-v",
                   help="the implementation that computes FVD: " + "; ".join(
                       f"{name}: {follows}" for name, follows in fvd_variants().items()) + " (default: stylegan-v)")
    p.add_argument("--fid-frames", default="all", metavar="SAMPLING",
                   help="the frames of each video FID takes, as papers state them: all (default), every:K (every "
                        "K-th from the first), count:N (N spread evenly from the first to the last) or first:N. FID "
                        "falls as frames are added: compare values of equal sample sizes only")
    p.add_argument("--all-variants", action="store_true",
                   help="also compute every other variant (LSE pipelines, FID and FVD variants) on the same videos and write "
                        "how far they disagree: classic_variants.csv and classic_variants.md")
    p.add_argument("--hf-dataset", metavar="ID",
                   help="also write each model's values as Hugging Face eval results (hf/MODEL/.eval_results/"
                        "theval-classic.yaml) for this benchmark dataset on the Hub")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def fid_variants() -> dict[str, str]:
    """FID variant -> the code it follows (backends/classic/fid.py VARIANTS; numpy and scipy only)."""
    from theval_mesh.backends.classic.fid import VARIANTS

    return {name: v.follows for name, v in VARIANTS.items()}


def fvd_variants() -> dict[str, str]:
    """FVD variant -> the code it follows (backends/classic/fvd.py VARIANTS)."""
    from theval_mesh.backends.classic.fvd import VARIANTS

    return {name: v.follows for name, v in VARIANTS.items()}


def run(args) -> int:
    from theval_mesh.studies import classic_metrics  # MediaPipe and scikit-image only when the command runs

    models = classic_metrics.generated_models(args.generated, args.model)
    result = classic_metrics.run(models, args.gt, store=args.store, progress=not args.no_progress,
                                lse_pipeline=args.lse_pipeline, source_image=args.source_image,
                                fid_variant=args.fid_variant, all_variants=args.all_variants,
                                fid_frames=args.fid_frames, fvd_variant=args.fvd_variant)
    videos, summary = classic_metrics.write_outputs(result, args.out, hf_dataset=args.hf_dataset)
    print(classic_metrics.format_summary(result))
    for line in classic_metrics.notes(result):  # stand-in warning, provenance, sample sizes
        print(line)
    for reason in result.skipped:
        print(reason)
    for row in result.rows:
        if row.lse_reason:
            print(f"LSE empty: {row.lse_reason}")
    for row in result.failed:
        print(f"failed: {row.reason}")
    print(f"per video: {videos}\nper model: {summary}")
    if result.variants:
        print(f"variants side by side: {videos.parent / 'classic_variants.md'}")
    print(f"VBench's per-video format: {videos.parent / 'vbench'}; Hugging Face eval results: "
          + (f"{videos.parent / 'hf'}" if args.hf_dataset else "pass --hf-dataset ID to write them"))
    return EXIT_PARTIAL if result.failed else EXIT_OK
