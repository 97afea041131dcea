"""`theval report` at leaderboard scale: 17 models x 100 videos (and a GT of 100), each a real
scored kit video (its trace and its file, for the thumbnails) under a new name. Targets: built in
under 30 s, under 20 MB. The baseline, in the same run: the same page with every trace embedded
as stored (no per-series quantisation), which shows what the page format saves.

    .venv/bin/python bench/report.py [RESULTS_DIR]    (an evaluation's folder; default: the kit
                                                      evaluated here first, about a minute)
"""
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

from theval_mesh.core import aggregate
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.outputs import html_report, results_files
from theval_mesh.outputs.results_files import RESULTS_JSONL
from theval_mesh.pure.scoring.final_score import leaderboard
from theval_mesh.pure.scoring.uncertainty import bootstrap

MODELS, VIDEOS = 17, 100


def evaluation() -> Path:
    from common import kit

    from theval_mesh import evaluate
    k = kit(n_clips=2, variants=("blur", "audio_shift"))
    out = Path(tempfile.mkdtemp(prefix="theval-bench-report-"))
    evaluate(str(Path(k.out_dir) / "gt"), [(v, str(Path(k.out_dir) / v)) for v in k.variants], out,
             quality="proxy", progress=False)
    return out


def scaled_results(source: Path, out: Path) -> None:
    """MODELS x VIDEOS results (+ a GT) cycled from `source`'s scored videos, written as an
    evaluation writes them."""
    real = [VideoResult.from_json(line) for line in (source / RESULTS_JSONL).read_text().splitlines()]
    real = [r for r in real if r.status == OK and r.trace]
    names = ["GT"] + [f"model_{i:02d}" for i in range(MODELS)]
    results = [dataclasses.replace(real[(m * VIDEOS + v) % len(real)], model=name)
               for m, name in enumerate(names) for v in range(VIDEOS)]
    rows = aggregate.model_rows(results, names)
    board = leaderboard(rows, gt_name="GT")
    values, items = aggregate.per_video(results, names)
    board.uncertainty = bootstrap(values, "GT", board.weights, [r.model for r in board.rows if r.rank], items=items)
    results_files.write_all(out, results, rows, board, {"job": "bench", "gt": "GT", "settings": {},
                                                  "provenance": rows[0].provenance, "warnings": []})


def main(source=None):
    source = Path(source) if source else evaluation()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        scaled_results(source, out)
        start = time.perf_counter()
        path = html_report.build_report(out, progress=False)
        seconds, size = time.perf_counter() - start, path.stat().st_size

        full = html_report._quantised  # the baseline: each series as stored, unquantised
        html_report._quantised = lambda values, points: {"lo": 0, "hi": html_report.LEVELS, "step": 1,
                                                         "v": [None if v is None else v for v in values]}
        try:
            baseline = html_report.build_report(out, out / "baseline.html", thumbnails=0, progress=False)
        finally:
            html_report._quantised = full
        videos = len(json.loads((out / "results.json").read_text())["leaderboard"])
        baseline_size = baseline.stat().st_size
    print(f"{videos - 1} models x {VIDEOS} videos (+ GT), thumbnails for the "
          f"{html_report.THUMBNAILS_PER_MODEL} lowest of each model")
    print(f"built in {seconds:.1f} s (target < 30 s: {seconds / 30:.2f} of it); {size / 1e6:.1f} MB "
          f"(target < 20 MB: {size / 20e6:.2f} of it)")
    print(f"every trace as stored, no thumbnails: {baseline_size / 1e6:.1f} MB ({baseline_size / size:.1f}x this page)")


if __name__ == "__main__":
    main(*sys.argv[1:])
