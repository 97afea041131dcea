"""`theval evaluate`: score GT and model videos, write per-video results and the leaderboard."""
import argparse
import os
import sys
from pathlib import Path

from ..cli import EXIT_OK, EXIT_PARTIAL
from ..common.errors import UserError
from ..media.limits import Limits
from ..metrics.profiles import PROFILES, REFERENCE
from ..orchestrator import aggregate, batch, outputs
from ..orchestrator.inputs import parse_model_arg, plan
from ..orchestrator.result_log import ResultLog
from ..orchestrator.results import FAILED
from ..orchestrator.settings import QUALITY_MODES, RunSettings
from ..quality.backend import QualityBackend
from ..scoring import tables
from ..scoring.final_score import leaderboard


def add_run_options(p: argparse.ArgumentParser):
    """Options shared by every command that scores videos."""
    p.add_argument("--profile", choices=PROFILES, default=REFERENCE,
                   help="reference: reproduce the reference code (default); paper: the paper's formulas")
    p.add_argument("--quality", choices=QUALITY_MODES, default="auto",
                   help="quality models: paper (needs weights), proxy (training-free), auto (default)")
    p.add_argument("--frame-stride", type=int, default=1, metavar="N", help="use every Nth frame (default 1)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="videos scored in parallel (default 1)")
    p.add_argument("--exact-reference", action="store_true",
                   help="run the reference code's extra FaceMesh passes instead of the single shared pass")
    p.add_argument("--normalise-translation", action="store_true",
                   help="head motion: express the face centre at 512 px so T does not grow with resolution")
    p.add_argument("--weights", default=None, metavar="SPEC",
                   help='Final-score weights: JSON, a JSON file, or "Global aesthetic=2,Mouth quality=0"')
    p.add_argument("--weights-store", default=None, metavar="DIR",
                   help="quality model weights directory (default $THEVAL_WEIGHTS or ~/.cache/theval/weights)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def settings_from(args) -> RunSettings:
    try:
        return RunSettings(profile=args.profile, quality=args.quality, frame_stride=args.frame_stride,
                           exact_reference=args.exact_reference,
                           normalise_translation=args.normalise_translation, limits=Limits())
    except ValueError as err:
        raise UserError(str(err)) from err


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
    add_run_options(p)
    p.set_defaults(func=run)


def evaluate(gt: str, models: list[tuple[str, str]], out: Path, settings: RunSettings, workers: int = 1,
             gt_name: str = "GT", weights=None, weights_store=None, progress: bool = True, mesh: str | None = None):
    """Score everything, write every output file; returns (board, results, paths).
    mesh: HOST:PORT of an evaluator that scores the videos instead of in-process backends."""
    names = [gt_name] + [m for m, _ in models]
    items = plan([(gt_name, gt)] + list(models))
    if workers < 1:
        raise UserError("--workers must be at least 1")
    # Resolve the quality models here, before any worker starts: missing weights for
    # --quality paper stop the run with one clear line, and auto says what it chose.
    # (Through a mesh, its quality service holds the weights.)
    if not mesh:
        quality = QualityBackend(mode=settings.quality, profile=settings.profile, store=weights_store)
        if progress:
            print(quality.notice, file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    log = ResultLog(out / outputs.RESULTS_JSONL)
    engine = None
    if mesh:
        from ..orchestrator.mesh_client import MeshEngine
        engine = MeshEngine(mesh, settings)
    results = batch.run(items, settings, log, workers=workers, quality_store=weights_store, progress=progress,
                        engine=engine)
    rows = aggregate.model_rows(results, names)
    if rows[0].provenance is None:
        raise UserError(f"no GT video could be scored (see {out / 'results.csv'}): nothing to compare with")
    board = leaderboard(rows, gt_name=gt_name, weights=weights)
    run_info = {"gt": gt, "models": dict(models), "settings": settings.key(), "workers": workers,
                "provenance": rows[0].provenance, "warnings": board.warnings}
    paths = outputs.write_all(out, results, rows, board, run_info)
    paths["results_jsonl"] = out / outputs.RESULTS_JSONL
    return board, results, paths


def partial(results) -> bool:
    """True when any video failed or could not be scored on every metric for lack of input."""
    return any(r.status == FAILED or any("no audio" in w for w in r.warnings) for r in results)


def print_summary(board, results, paths, stream=sys.stdout):
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
    board, results, paths = evaluate(args.gt, models, Path(args.out), settings, workers=args.workers,
                                     gt_name=args.gt_name, weights=args.weights,
                                     weights_store=args.weights_store, progress=not args.quiet, mesh=args.mesh)
    print_summary(board, results, paths)
    return EXIT_PARTIAL if partial(results) else EXIT_OK
