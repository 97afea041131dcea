"""`theval report RESULTS_DIR`: one self-contained HTML report of an evaluation."""
import argparse
import sys


def _thumbnails(value: str):
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: a number of videos per model (0: none), or 'all'")
    return n


def register(subparsers) -> None:
    from theval_mesh.outputs.html_report import REPORT, THUMBNAILS_PER_MODEL
    p = subparsers.add_parser(
        "report", help="write one self-contained HTML report of an evaluation's results",
        description="Read RESULTS_DIR (what `theval evaluate --out` or `theval bulk results --out` wrote) "
                    f"and write {REPORT} there: the sortable leaderboard with its intervals, a radar chart "
                    "per model, bars per dimension (with the published leaderboard to switch on), and a "
                    "page per video. No network is needed to view it.")
    p.add_argument("results_dir", metavar="RESULTS_DIR")
    p.add_argument("--out", metavar="FILE", help=f"where to write the report (default RESULTS_DIR/{REPORT})")
    p.add_argument("--thumbnails", type=_thumbnails, default=THUMBNAILS_PER_MODEL, metavar="N|all",
                   help="worst-frame thumbnails for the N lowest-scored videos of each model, read from "
                        f"the video files (default {THUMBNAILS_PER_MODEL}; 0: none; all: every video)")
    p.add_argument("--published", action="store_true",
                   help="offer the published leaderboard even beside results scored otherwise than the published "
                        "figures (the proxy, the rigid fit, stand-in weights): labelled as not comparable")
    p.add_argument("--title", metavar="TEXT", help="the page's title and heading (default: THEval report: <folder name>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from theval_mesh.api.reports import write_report
    path = write_report(args.results_dir, args.out, thumbnails=args.thumbnails, progress=not args.no_progress,
                        published=args.published, title=args.title)
    size = path.stat().st_size
    print(f"report: {path} ({size / 1e6:.1f} MB)", file=sys.stderr)
    print(path)
    return 0
