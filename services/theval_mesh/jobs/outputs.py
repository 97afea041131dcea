"""The files an evaluation writes: per-video results, the raw table, the leaderboard, a plot."""
import csv
import json
import math
from pathlib import Path

from theval_mesh.core.provenance import headline
from theval_mesh.core.results import VideoResult
from theval_mesh.pure.metrics.registry import REGISTRY
from theval_mesh.pure.scoring import tables
from theval_mesh.pure.scoring.final_score import Leaderboard

RESULTS_JSONL = "results.jsonl"
RESULTS_DB = "results.sqlite"  # the job store of `theval evaluate`: every result as it is committed


def write_results_csv(results: list[VideoResult], path: Path):
    keys = [m.key for m in REGISTRY]
    cols = (["model", "video", "status", "reason"] + keys
            + ["nan_reasons", "frames_total", "frames_used", "face_frames", "fps", "width", "height",
               "seconds", "warnings", "provenance"])
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in sorted(results, key=lambda r: (r.model, r.video)):
            metrics = ["" if math.isnan(r.metrics.get(k, math.nan)) else repr(r.metrics[k]) for k in keys]
            w.writerow([r.model, r.video, r.status, r.reason or ""] + metrics + [
                "; ".join(f"{k}: {v}" for k, v in r.nan_reasons.items()), r.frames_total, r.frames_used,
                r.face_frames, r.fps, r.width, r.height, r.seconds,
                " | ".join(w for w in r.warnings if not w.startswith("Traceback")),
                json.dumps(r.provenance, sort_keys=True)])


def plot_leaderboard(board: Leaderboard, path: Path):
    """Normalised scores per model and metric as a heat map, with the Final score beside it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in board.rows if not r.is_gt] or board.rows
    metrics = [m.name for m in REGISTRY]
    grid = np.array([[r.scores.get(m, math.nan) for m in metrics] for r in rows])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 1.2 + 0.45 * len(rows)),
                                 gridspec_kw={"width_ratios": [4, 1]})
    im = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(metrics)), metrics, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), [r.model for r in rows], fontsize=8)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if not math.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_title("normalised score per metric (1 = like GT)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    finals = [r.final for r in rows]
    bx.barh(range(len(rows)), finals, color="tab:blue")
    for i, f in enumerate(finals):
        if not math.isnan(f):
            bx.text(max(f, 0) + 0.01, i, f"{f:.3f}", va="center", fontsize=7)
    bx.set_yticks(range(len(rows)), [])
    bx.invert_yaxis()
    ax.set_ylim(len(rows) - 0.5, -0.5)
    bx.set_xlim(min(0, np.nanmin(finals) if finals else 0), 1.15)
    bx.set_title("Final score", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(out: Path, results: list[VideoResult], rows, board: Leaderboard, run_info: dict) -> dict:
    """Write every output file; return name -> path."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "results_jsonl": out / RESULTS_JSONL,
        "results_csv": out / "results.csv",
        "raw_metrics": out / "raw_metrics.csv",
        "leaderboard_csv": out / "leaderboard.csv",
        "leaderboard_md": out / "leaderboard.md",
        "plot": out / "leaderboard.png",
        "run": out / "run.json",
    }
    paths["results_jsonl"].write_text("".join(r.to_json() + "\n" for r in results))
    write_results_csv(results, paths["results_csv"])
    tables.write_raw_csv(rows, paths["raw_metrics"])
    tables.write_leaderboard_csv(board, paths["leaderboard_csv"])
    scored = next((r for r in results if r.provenance), None)
    top = f"{headline(scored.provenance)}\n\n" if scored else ""
    paths["leaderboard_md"].write_text(top + tables.leaderboard_markdown(board))
    plot_leaderboard(board, paths["plot"])
    paths["run"].write_text(json.dumps(run_info, indent=2, sort_keys=True, default=str))
    return paths
