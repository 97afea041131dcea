"""`theval score`: Final score and leaderboard from a raw metric CSV (reference layout)."""
import dataclasses
import json
import math
from pathlib import Path

from theval_mesh.outputs.run_files import check_folder
from theval_mesh.pure.exit_codes import EXIT_OK, EXIT_PARTIAL
from theval_mesh.pure.scoring import (
    format_leaderboard_text,
    leaderboard,
    leaderboard_markdown,
    published_gt,
    read_raw_csv,
    write_leaderboard_csv,
)
from theval_mesh.pure.scoring.errors import ScoringError
from theval_mesh.pure.scoring.final_score import WEIGHTS_EXAMPLE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "score", help="rank models by THEval Final score from a raw metric CSV",
        description="Normalise each model's 8 raw metric values by the GT row "
                    "(1 - |x-g|/|g|), average them into the Final score and rank the models.")
    p.add_argument("--metrics", required=True, metavar="RAW.csv",
                   help="raw metric values, one row per model (the reference code's CSV layout; "
                        "column aliases accepted, extra columns ignored)")
    p.add_argument("--gt-name", default="GT", help="name of the ground-truth row (default: GT)")
    p.add_argument("--gt-published", action="store_true",
                   help="take the GT row from the published THEval figures (only meaningful for "
                        "the THEval dataset scored with the reference profile)")
    p.add_argument("--model-column", default="Model",
                   help="column holding the model names (default: Model, else the first column)")
    p.add_argument("--weights", metavar="SPEC",
                   help=f'per-metric weights: JSON object, JSON file, or "{WEIGHTS_EXAMPLE}" '
                        '(unspecified metrics weigh 1)')
    p.add_argument("--allow-mixed", action="store_true",
                   help="compare GT and models scored with different profiles/backends "
                        "(flagged in the output instead of refused)")
    p.add_argument("--out", metavar="DIR", help="write leaderboard.csv and leaderboard.md here")
    p.set_defaults(func=run)


def score_file(path, gt_name: str = "GT", gt_published: bool = False, weights=None,
               allow_mixed: bool = False, model_column: str = "Model"):
    """Leaderboard of a raw metric CSV; the GT row comes from the file or the published figures."""
    check_folder(Path(path).parent, listing=Path(path).name)  # a results folder's raw_metrics.csv
    rows = read_raw_csv(path, model_column=model_column)
    if gt_published:
        # A results folder's raw_metrics.csv: its run's provenance (run.json beside it) says how it
        # was scored, so that results the published figures cannot be compared with are refused.
        found = provenance_beside(path)
        rows = [dataclasses.replace(r, provenance=r.provenance or found) for r in rows]
        if any(r.model == gt_name for r in rows):
            raise ScoringError(f"{path} has its own {gt_name!r} row and --gt-published was given: "
                               "drop one of them (or rename the row)")
        rows = [dataclasses.replace(published_gt(), model=gt_name)] + rows
    return leaderboard(rows, gt_name=gt_name, weights=weights, allow_mixed=allow_mixed)


def provenance_beside(path) -> dict | None:
    """The provenance in the run.json beside `path` (a results folder's raw_metrics.csv); None
    when there is none."""
    try:
        found = json.loads(Path(path).with_name("run.json").read_text()).get("provenance")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


def write_outputs(board, out_dir) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / "leaderboard.csv", out_dir / "leaderboard.md"
    write_leaderboard_csv(board, csv_path)
    md_path.write_text(leaderboard_markdown(board), encoding="utf-8")
    return [csv_path, md_path]


def run(args) -> int:
    board = score_file(args.metrics, gt_name=args.gt_name, gt_published=args.gt_published,
                       weights=args.weights, allow_mixed=args.allow_mixed,
                       model_column=args.model_column)
    print(format_leaderboard_text(board))  # includes notes and warnings
    if args.out:
        for path in write_outputs(board, args.out):
            print(f"wrote {path}")
    # A model without a Final score (a metric no video had) makes the result partial.
    unscored = [r for r in board.rows if not r.is_gt and math.isnan(r.final)]
    return EXIT_PARTIAL if unscored else EXIT_OK
