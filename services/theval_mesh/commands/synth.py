"""`theval synth`: write a kit of synthetic talking heads with known ground truth."""
import time

from theval_mesh.pure.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "synth", help="generate synthetic talking-head videos (GT + degraded variants)",
        description="Animate a real face photo with espeak-ng speech (mouth from the audio "
                    "envelope, head roll and shift, brow raises) and write GT clips, degraded "
                    "variants, the driving signals and a manifest.json into DIR.")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--clips", type=int, default=3, help="number of GT clips (default: 3)")
    p.add_argument("--duration", type=float, default=6.0, metavar="S",
                   help="clip duration in seconds (default: 6)")
    p.add_argument("--size", type=int, default=256, metavar="PX",
                   help="frame width and height in pixels (default: 256)")
    p.set_defaults(func=run)


def run(args) -> int:
    from theval_mesh.synth import generate_kit  # heavy imports only when the command runs
    from theval_mesh.synth.speech import espeak_available

    if not espeak_available():
        raise UserError("espeak-ng is not installed: install it (apt-get install espeak-ng)")
    if args.clips < 1 or args.duration <= 0 or args.size < 64:
        raise UserError("need --clips >= 1, --duration > 0 and --size >= 64")
    start = time.monotonic()
    try:
        kit = generate_kit(args.out, seed=args.seed, n_clips=args.clips,
                           duration_s=args.duration, size=args.size)
    except ValueError as err:  # e.g. a duration too short for one utterance
        raise UserError(str(err)) from err
    n_videos = len(kit.clips) * (1 + len(kit.variants))
    print(f"synthetic kit in {kit.out_dir} ({time.monotonic() - start:.1f} s)")
    print(f"  {len(kit.clips)} clips x (gt + {len(kit.variants)} variants) = {n_videos} videos, "
          f"{kit.size}x{kit.size} px, {kit.fps} fps, {kit.duration_s:g} s, "
          f"languages {', '.join(kit.languages)}")
    print(f"  gt videos:   {kit.out_dir / 'gt'}")
    print(f"  variants:    {', '.join(kit.variants)} (one folder each)")
    print(f"  signals:     {kit.out_dir / 'signals'}")
    print(f"  manifest:    {kit.manifest_path}")
    return 0
