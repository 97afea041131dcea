"""How far the implementations of each classic metric disagree on the same videos: `theval classic
--all-variants` on the demo kit (the README's demo: 3 clips of 6 s at 256 px, seed 0, GT against its
8 degraded variants) or on the parity clips (4 speakers, 512 px, GT against MODELS), with stand-in
weights of every classic network (seed 0) unless --store names a store of the published ones.

    .venv/bin/python bench/classic_variants.py demo [--out DIR] [--store STORE]
    .venv/bin/python bench/classic_variants.py parity [--models noisy desync] [--speakers ...] [--out DIR]

Prints classic_variants.md (the table docs/classic-metrics.md quotes) and the time the run took.
With stand-in weights every variant runs the same stand-in network, so the table shows only what
the pipelines do differently (resize, crops, re-encodings, sampling, statistics)."""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import common

from theval_mesh.backends import stand_in
from theval_mesh.studies import classic_metrics

# Not fvd-videomae (cd-fvd-videomae): its 3.8 GB ViT-g costs about 40 s a clip on 2 cores; add it to include that FVD.
CLASSIC = ["syncnet", "s3fd", "fid-inception", "fid-inception-torchscript", "fvd-i3d", "fvd-i3d-videogpt", "arcface"]
PARITY = common.ROOT / "tests" / "data" / "parity" / "clips"
SPEAKERS = ("astronaut_de", "t1center_en", "t1left_de", "tom_it")


def demo_kit(work: Path) -> tuple[Path, list[tuple[str, str]]]:
    from theval_mesh.synth import generate_kit

    kit = generate_kit(work / "kit", seed=0, n_clips=3, duration_s=6.0, size=256, reuse=True)
    return work / "kit" / "gt", [(v, str(work / "kit" / v)) for v in kit.variants]


def parity_kit(work: Path, models: list[str], speakers: list[str]) -> tuple[Path, list[tuple[str, str]]]:
    """GT and model folders of links to the parity clips, each video named for its speaker."""
    for folder in ["gt", *models]:
        (work / folder).mkdir(parents=True, exist_ok=True)
        for speaker in speakers:
            link = work / folder / f"{speaker}.mp4"
            if not link.exists():
                link.symlink_to(PARITY / f"{speaker}_{folder}.mp4")
    return work / "gt", [(m, str(work / m)) for m in models]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kit", choices=["demo", "parity"])
    ap.add_argument("--models", nargs="+", default=["noisy", "desync"], help="parity: the variants scored")
    ap.add_argument("--speakers", nargs="+", default=list(SPEAKERS), choices=SPEAKERS, help="parity: whose clips")
    ap.add_argument("--out", type=Path, help="output folder (default: a new temporary one)")
    ap.add_argument("--store", type=Path, help="a weights store (default: stand-ins of every classic network)")
    args = ap.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="theval-classic-variants-"))
    store = args.store
    if store is None:
        store = work / "stand-ins"
        stand_in.write(store, 0, models=(), classic=CLASSIC)
    gt, models = demo_kit(work) if args.kit == "demo" else parity_kit(work / "parity", args.models, args.speakers)
    started = time.perf_counter()
    result = classic_metrics.run(models, gt, store=store, all_variants=True, progress=True)
    classic_metrics.write_outputs(result, work / "out")
    seconds = time.perf_counter() - started
    print((work / "out" / "classic_variants.md").read_text())
    for reason in result.skipped:
        print(reason, file=sys.stderr)
    print(f"{len(result.rows)} generated videos, {len(models)} models, all variants in {seconds:.0f} s; "
          f"files in {work / 'out'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
