"""`theval evaluate`: score GT and model videos, write per-video results and the leaderboard."""
import argparse
import os
import sys
from pathlib import Path

from theval_mesh.api.evaluation import evaluate
from theval_mesh.core.inputs import parse_model_arg
from theval_mesh.core.provenance import headline
from theval_mesh.core.results import FAILED
from theval_mesh.pure.errors import UsageRefused
from theval_mesh.pure.exit_codes import EXIT_OK, EXIT_PARTIAL
from theval_mesh.pure.inference import DEVICE_HELP, PRECISIONS, RUNTIMES, InferenceOptions
from theval_mesh.pure.scoring import tables
from theval_mesh.pure.scoring.final_score import WEIGHTS_EXAMPLE
from theval_mesh.pure.settings import SETTINGS, RunSettings
from theval_mesh.pure.workers import AUTO, workers_arg


def add_run_options(p: argparse.ArgumentParser):
    """Options shared by every command that scores videos: the run settings (pure.settings) and how to run."""
    for s in SETTINGS:
        if s.kind is bool:
            p.add_argument(s.flag, action="store_true", help=s.help)
        else:
            p.add_argument(s.flag, type=s.kind, choices=s.choices, default=s.default,
                           metavar="N" if s.kind is int and not s.choices else None, help=s.help)
    p.add_argument("--runtime", choices=RUNTIMES, default="auto",
                   help="inference runtime of the networks (paper quality, FaceXFormer): auto (default: the fastest "
                        "measured on the device), torch (eager PyTorch, the yardstick), onnxruntime, openvino")
    p.add_argument("--device", default="auto", metavar="DEVICE",
                   help=f"device of the networks and their face detectors: {DEVICE_HELP}")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32 (default), or fp16/bf16 on torch: other numbers, labelled in every output and never "
                        "mixed with fp32 results")
    p.add_argument("--workers", type=workers_arg, default=AUTO, metavar="N",
                   help="Ray workers: videos scored in parallel, each worker loading the models once (default auto: "
                        "one, in this process, on fewer than 4 cores unless 64 videos or more; the choice and why "
                        "are printed for 16 videos or more)")
    p.add_argument("--weights", default=None, metavar="SPEC",
                   help=f'Final-score weights: JSON, a JSON file, or "{WEIGHTS_EXAMPLE}"')
    p.add_argument("--partial-score", action="store_true",
                   help="when the GT cannot normalise a metric (e.g. no GT video has audio), form the Final score "
                        "over the other metrics instead of refusing; labelled partial on every output and never "
                        "comparable with a full THEval Final score")
    p.add_argument("--allow-unpaired", action="store_true",
                   help="score a model none of whose videos has a GT video's file name (refused by default: a "
                        "generated video is named after the GT video it was made from)")
    p.add_argument("--weights-store", default=None, metavar="DIR",
                   help="quality model weights directory (default $THEVAL_WEIGHTS or ~/.cache/theval/weights)")
    p.add_argument("--cache", default=None, metavar="FILE|URL",
                   help="the result cache: a video whose bytes were scored with the same settings, backends and "
                        "tool version is reused, not scored again (default $THEVAL_CACHE or "
                        "~/.cache/theval/results-cache.sqlite; `theval cache status|clear`)")
    p.add_argument("--no-cache", action="store_true", help="score every video, neither reading nor filling the cache")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def cache_choice(args):
    """--no-cache / --cache FILE|URL as the API's `cache`."""
    return False if args.no_cache else (args.cache or True)


def add_log_options(p: argparse.ArgumentParser):
    p.add_argument("--log-to", choices=["mlflow"], default=None,
                   help="also log the leaderboard with its intervals, the settings and the files (with the "
                        "HTML report) as an MLflow run")
    p.add_argument("--mlflow-uri", default=None, metavar="URI",
                   help="MLflow tracking URI (default $MLFLOW_TRACKING_URI, else a file store in OUT/mlruns)")
    p.add_argument("--mlflow-experiment", default="theval", metavar="NAME", help="MLflow experiment (default theval)")


def log_run(args, out) -> None:
    """--log-to mlflow, after the summary: the HTML report, then the results folder as one MLflow run."""
    if args.log_to != "mlflow":
        return
    from theval_mesh.api.reports import log_to_mlflow, write_report
    write_report(out, progress=not getattr(args, "quiet", False))
    run = log_to_mlflow(out, args.mlflow_uri, args.mlflow_experiment)
    print(f"logged to MLflow: {run.uri}, experiment {run.experiment}, run {run.run_id}", file=sys.stderr)


def inference_from(args) -> dict:
    """--runtime, --device, --precision as the API's keywords (checked: a bad device exits 2)."""
    return InferenceOptions.from_values(vars(args)).to_dict()


def settings_from(args) -> RunSettings:
    try:
        return RunSettings.from_values(vars(args))
    except ValueError as err:
        raise UsageRefused(str(err)) from err


def register(sub):
    p = sub.add_parser("evaluate", help="score GT and model videos and print the leaderboard",
                       description="Score every video of the GT set and of each model, then rank the "
                                   "models against the GT. Re-running the same command resumes.")
    p.add_argument("--gt", required=True, metavar="DIR", help="GT videos: a folder, a video, or a .txt list")
    p.add_argument("--gt-name", default="GT", help="name of the GT row (default GT)")
    p.add_argument("--model", action="append", default=[], metavar="NAME=DIR",
                   help="a model's videos (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR", help="where results are written")
    p.add_argument("--mesh", default=None, metavar="HOST:PORT",
                   help="score through a running mesh's evaluator (`theval mesh up`) instead of in-process; "
                        "its allowed roots must hold the videos. --workers N keeps N videos in flight")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="run on this Ray cluster (default: start a local Ray for the run and stop it after)")
    p.add_argument("--inline", action="store_true", default=None,
                   help="score in this process, one video at a time, without Ray (the default with one worker "
                        "and no --ray-address)")
    p.add_argument("--ray", dest="inline", action="store_false",
                   help="run on a Ray even with one worker (a local one unless --ray-address)")
    add_run_options(p)
    add_log_options(p)
    p.set_defaults(func=run)


def partial(results) -> bool:
    """True when any video failed or could not be scored on every metric for lack of input."""
    return any(r.status == FAILED or any("audio track" in w for w in r.warnings) for r in results)


def print_summary(board, results, paths, stream=None):
    stream = stream or sys.stdout  # at call time: a default bound at import would outlive a redirect
    scored = next((r for r in results if r.provenance), None)
    if scored:
        print(headline(scored.provenance), file=stream)
    print(tables.format_leaderboard_text(board), file=stream)
    for w in board.warnings:
        print(f"warning: {w}", file=stream)
    failed = [r for r in results if r.status == FAILED]
    print(f"\n{len(results) - len(failed)} video(s) scored, {len(failed)} failed", file=stream)
    for r in failed:
        print(f"  FAILED [{r.model}] {r.video}: {r.reason}", file=stream)
    print(f"results in {os.path.dirname(str(paths['leaderboard_md']))}/: "
          + ", ".join(sorted(Path(p).name for p in paths.values())), file=stream)


def run(args) -> int:
    settings = settings_from(args)
    models = [parse_model_arg(m) for m in args.model]
    evaluation = evaluate(args.gt, models, args.out, settings=settings, workers=args.workers, gt_name=args.gt_name,
                          weights=args.weights, partial_score=args.partial_score, allow_unpaired=args.allow_unpaired,
                          weights_store=args.weights_store,
                          progress=not args.quiet, cache=cache_choice(args),
                          mesh=args.mesh, inline=args.inline, ray_address=args.ray_address, **inference_from(args))
    print_summary(evaluation.board, evaluation.results, evaluation.paths)
    log_run(args, args.out)
    return EXIT_PARTIAL if partial(evaluation.results) else EXIT_OK
