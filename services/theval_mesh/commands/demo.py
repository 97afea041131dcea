"""`theval demo`: make the synthetic kit, score GT against its degraded variants, show the board."""
from pathlib import Path

from theval_mesh.api.evaluation import evaluate
from theval_mesh.commands.evaluate import (
    add_run_options,
    cache_choice,
    inference_from,
    partial,
    print_summary,
    settings_from,
)
from theval_mesh.pure.exit_codes import EXIT_OK, EXIT_PARTIAL


def register(sub):
    p = sub.add_parser("demo", help="score a synthetic talking-head kit: GT against degraded variants",
                       description="Generates a small synthetic talking-head kit (a real face photo, "
                                   "espeak-ng speech, known head/mouth/brow motion) and evaluates the GT "
                                   "clips against degraded variants on the embedded default.")
    p.add_argument("--out", default="theval-demo", metavar="DIR", help="output folder (default ./theval-demo)")
    p.add_argument("--clips", type=int, default=3, help="clips per variant (default 3)")
    p.add_argument("--duration", type=float, default=6.0, metavar="S", help="clip length in seconds (default 6)")
    p.add_argument("--size", type=int, default=256, metavar="PX", help="frame size (default 256)")
    p.add_argument("--seed", type=int, default=0)
    add_run_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from theval_mesh.synth import generate_kit, load_kit  # OpenCV and MediaPipe (extras) only when it runs

    out = Path(args.out)
    kit_dir = out / "kit"
    kit = load_kit(kit_dir, seed=args.seed, n_clips=args.clips, duration_s=args.duration, size=args.size)
    if kit is None:
        print(f"generating the synthetic kit in {kit_dir} ...")
        kit = generate_kit(kit_dir, seed=args.seed, n_clips=args.clips, duration_s=args.duration, size=args.size)
    else:
        print(f"reusing the synthetic kit in {kit_dir}")
    models = [(v, str(kit_dir / v)) for v in kit.variants]
    evaluation = evaluate(str(kit_dir / "gt"), models, out / "results", settings=settings_from(args),
                          workers=args.workers, weights=args.weights, partial_score=args.partial_score,
                          allow_unpaired=args.allow_unpaired,
                          weights_store=args.weights_store, progress=not args.quiet, cache=cache_choice(args),
                          **inference_from(args))
    print_summary(evaluation.board, evaluation.results, evaluation.paths)
    return EXIT_PARTIAL if partial(evaluation.results) else EXIT_OK
