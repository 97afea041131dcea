"""`theval robustness`: each metric's noise floor on your own GT clips (api/robustness.py)."""
from theval_mesh.commands.evaluate import add_run_options, cache_choice, inference_from, settings_from
from theval_mesh.pure.exit_codes import EXIT_OK
from theval_mesh.pure.scoring.robustness import KINDS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "robustness", help="each metric's noise floor: how much re-encoding the GT alone moves it",
        description="Re-encode every GT video in ways that should not matter (H.264 <-> H.265, AAC <-> MP2, "
                    "CRF 18 / 28, 25 <-> 30 fps, 512 <-> 256 px), score each re-encode against the originals "
                    "and write how far each normalised score moves, with its interval (and LSE-C/LSE-D's "
                    "change when SyncNet's weights are in the store). A gap between two models below a "
                    "metric's floor cannot be told from a codec choice.")
    p.add_argument("--gt", required=True, metavar="DIR", help="GT videos (a folder or a video)")
    p.add_argument("--out", default="robustness_results", metavar="DIR",
                   help="output folder (default ./robustness_results); re-running resumes")
    p.add_argument("--kind", action="append", choices=KINDS, metavar="KIND",
                   help=f"re-encodes to run (repeatable; default all: {', '.join(KINDS)})")
    p.add_argument("--results", metavar="DIR",
                   help="an evaluation's folder: say which of its adjacent ranks are closer than the noise floor "
                        "(printed and added to its results.json)")
    p.add_argument("--no-lse", action="store_true", help="skip LSE-C/LSE-D even when SyncNet's weights are there")
    p.add_argument("--inline", action="store_true", help="score in this process without Ray")
    add_run_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from theval_mesh.api.robustness import robustness, table_markdown

    result = robustness(args.gt, args.out, kinds=tuple(args.kind or KINDS), results=args.results,
                        store=args.weights_store, lse=not args.no_lse, progress=not args.quiet,
                        settings=settings_from(args), workers=args.workers, inline=args.inline,
                        weights=args.weights, partial_score=args.partial_score, cache=cache_choice(args),
                        **inference_from(args))
    print(table_markdown(result))
    print(f"written: {args.out}/robustness.md, robustness.csv, robustness.json, robustness.png")
    return EXIT_OK
