"""robustness(): each metric's noise floor on the user's own GT clips. Every GT video is re-encoded
in ways that should not matter (synth/reencode.py: the other video codec, the other audio codec,
CRF 18 / 28, the other frame rate, half or double the resolution); each re-encode is scored as a
"model" against the originals (evaluate(), with its bootstrap intervals), and, when SyncNet's
weights are in the store, LSE-C / LSE-D of each re-encode are compared with the originals' (paired
by clip). What moves is each metric's noise floor (pure/scoring/robustness.py): a ranking gap
below it cannot be told from a codec choice.
"""
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from theval_mesh.api.evaluation import Evaluation, evaluate
from theval_mesh.core.aggregate import per_video
from theval_mesh.core.inputs import videos_in
from theval_mesh.core.provenance import headline
from theval_mesh.core.results import json_safe
from theval_mesh.outputs.whole_files import write_text
from theval_mesh.pure import csv_cells
from theval_mesh.pure.errors import UserError, VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.scoring import robustness as rb
from theval_mesh.pure.scoring import uncertainty
from theval_mesh.pure.scoring.names import GROUPS, METRICS
from theval_mesh.synth import reencode

__all__ = ["Robustness", "robustness"]
LSE_COLUMNS = ("lse_c", "lse_d")


@dataclass
class Robustness:
    """What robustness() returns and writes."""
    changes: list[rb.Change]                  # per re-encode and metric: normalised score - 1, interval
    floors: dict[str, tuple[float, str]]      # metric -> (largest |change|, the re-encode behind it)
    lse: list[dict] = field(default_factory=list)  # per re-encode: mean paired LSE-C/LSE-D change, interval
    notes: list[str] = field(default_factory=list)  # provenance, sample sizes, stand-ins, failures
    below_floor: list[str] = field(default_factory=list)  # for `results`: adjacent ranks under the floor
    proxies: list[str] = field(default_factory=list)  # metrics the training-free proxy computed

    def label(self, metric: str) -> str:
        return f"{metric} (PROXY)" if metric in self.proxies else metric
    evaluation: Evaluation | None = field(default=None, repr=False)


def _variants(gt: Path, out: Path, kinds, progress: bool, limits: Limits) -> tuple[dict[str, Path], dict[str, str],
                                                                                 list[str]]:
    videos = videos_in(gt) if gt.is_dir() else [gt]
    if not videos:
        raise UserError(f"--gt {gt}: no video to re-encode")
    folders, whats, failed = {}, {}, []
    for kind in kinds:
        folders[kind] = out / "variants" / kind
        whats[kind] = reencode.describe(kind, videos[0]).what
    todo = [(k, v) for k in kinds for v in videos]
    for kind, video in tqdm(todo, desc="re-encodes", unit="video", disable=not progress):
        dst = folders[kind] / f"{video.stem}.mp4"
        if dst.is_file():  # written by an earlier run: resumed
            continue
        try:
            reencode.reencode(video, dst.with_suffix(".part.mp4"), kind, limits).rename(dst)
        except VideoError as err:
            failed.append(f"{kind}: {err}")
    return folders, whats, failed


def _paired(evaluation: Evaluation, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The raw metrics of the GT clips and of their re-encodes by `kind`, row for row (clips scored
    on both sides only)."""
    gt_name = next(r.model for r in evaluation.leaderboard if r.is_gt)
    values, items = per_video(evaluation.results, [gt_name, kind])
    gt_rows = {item: row for item, row in zip(items[gt_name], values[gt_name], strict=True)}
    pairs = [(gt_rows[item], row) for item, row in zip(items[kind], values[kind], strict=True) if item in gt_rows]
    return (np.array([p[0] for p in pairs]).reshape(-1, len(METRICS)),
            np.array([p[1] for p in pairs]).reshape(-1, len(METRICS)))


def _lse_changes(gt: Path, folders: dict[str, Path], whats: dict[str, str], store, progress: bool):
    """Per re-encode, LSE-C and LSE-D of each clip minus the original's, their mean and interval."""
    from theval_mesh.api.classic import classic

    run = classic(gt, {"original": gt, **{k: f for k, f in folders.items()}}, store=store, progress=progress)
    if "LSE-C/LSE-D" not in run.provenance:
        return [], [*run.skipped]
    by = {(r.model, Path(r.video).stem): r for r in run.rows if r.status == "ok"}
    out = []
    for kind in folders:
        stems = [s for (m, s) in by if m == kind and ("original", s) in by]
        diffs = np.array([[getattr(by[(kind, s)], c) - getattr(by[("original", s)], c) for c in LSE_COLUMNS]
                          for s in stems], float).reshape(len(stems), 2)
        bounds = uncertainty.mean_intervals(diffs)
        row = {"kind": kind, "what": whats[kind], "clips": int(np.isfinite(diffs[:, 0]).sum())}
        for j, c in enumerate(("LSE-C", "LSE-D")):
            finite = diffs[:, j][np.isfinite(diffs[:, j])]
            row[c] = float(finite.mean()) if finite.size else math.nan
            row[c + " CI low"], row[c + " CI high"] = bounds[j]
        out.append(row)
    return out, [f"LSE-C/LSE-D: {run.provenance['LSE-C/LSE-D']}", *run.skipped]


def robustness(gt: str | Path, out: str | Path, *, kinds=reencode.KINDS, results: str | Path | None = None,
               store: str | Path | None = None, lse: bool = True, progress: bool = True, **evaluate_options) -> Robustness:
    """Re-encode every GT video by each of `kinds`, score them against the originals, and write
    robustness.csv / .md / .json (and robustness.png, the changes as a heat map) in `out`.
    results: an evaluation's folder whose leaderboard gets the notes of adjacent ranks closer than
    the Final score's noise floor (printed, and in its results.json under "robustness").
    store: the weights store for LSE (when SyncNet is there). evaluate_options: evaluate()'s."""
    gt, out = Path(gt), Path(out)
    unknown = [k for k in kinds if k not in reencode.KINDS]
    if unknown:
        raise UserError(f"unknown re-encode {', '.join(unknown)}; known: {', '.join(reencode.KINDS)}")
    settings = evaluate_options.get("settings")
    folders, whats, failed = _variants(gt, out, kinds, progress, settings.limits if settings else Limits())
    evaluation = evaluate(gt, {k: f for k, f in folders.items()}, out / "evaluation", progress=progress,
                          weights_store=evaluate_options.pop("weights_store", None) or store, **evaluate_options)
    table, clips = [], {}
    for kind in folders:
        gt_values, values = _paired(evaluation, kind)
        clips[kind] = len(values)
        if len(values):
            table += rb.changes(kind, whats[kind], uncertainty.paired_scores(gt_values, values, evaluation.board.weights))
    result = Robustness(table, rb.noise_floors(table), evaluation=evaluation)
    scored = next((r for r in evaluation.results if r.provenance), None)
    result.proxies = json.loads(Path(evaluation.paths["results_json"]).read_text()).get("proxy_quality", [])
    result.notes = [*([headline(scored.provenance)] if scored else []),
                    *([f"PROXY: {', '.join(result.proxies)} computed by the training-free proxy, not the paper's "
                       "models"] if result.proxies else []),
                    *(f"re-encode failed: {f}" for f in failed), *evaluation.warnings,
                    "clips scored per re-encode: " + ", ".join(f"{k} {n}" for k, n in clips.items()),
                    f"intervals: {uncertainty.LEVEL:.0%} bootstrap over clips, each clip and its re-encode drawn "
                    f"together ({uncertainty.RESAMPLES} resamples, seed {uncertainty.SEED})"]
    if lse:
        result.lse, lse_notes = _lse_changes(gt, folders, whats, store, progress)
        result.notes += lse_notes
    if results is not None:
        result.below_floor = _mark_results(Path(results), result)
    write(result, out)
    return result


def _mark_results(folder: Path, result: Robustness) -> list[str]:
    """Notes for the evaluation in `folder` whose adjacent ranks are closer than the floor, added to
    its results.json under "robustness"."""
    path = folder / "results.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"--results {folder}: no readable results.json ({err}); give a folder `theval evaluate` "
                        "wrote") from None
    floor, kind = result.floors.get(rb.FINAL, (math.nan, ""))
    ranked = sorted(((e["model"], e["final"]["value"]) for e in doc.get("leaderboard", [])
                     if not e["is_gt"] and e.get("rank")), key=lambda mf: -mf[1])
    notes = rb.below_floor(ranked, floor, kind) if not math.isnan(floor) else []
    doc["robustness"] = json_safe({"floors": {m: {"floor": f, "kind": k} for m, (f, k) in result.floors.items()},
                                   "below_floor": notes})
    write_text(path, json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")  # whole, links replaced
    return notes


# ---------------------------------------------------------------- outputs
def table_markdown(result: Robustness) -> str:
    """Rows: metrics, groups, Final score; columns: the re-encodes; each cell the change of the
    normalised score with its interval; last column the noise floor."""
    kinds = list(dict.fromkeys(c.kind for c in result.changes))
    whats = {c.kind: c.what for c in result.changes}
    cell = {(c.metric, c.kind): c for c in result.changes}
    head = ["Metric", *(f"{k} ({whats[k]})" for k in kinds), "Noise floor"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for metric in [*METRICS, *GROUPS, rb.FINAL]:
        cells = []
        for k in kinds:
            c = cell.get((metric, k))
            cells.append("-" if c is None or math.isnan(c.change) else
                         f"{c.change:+.4f} [{c.low:+.4f}, {c.high:+.4f}]" if not math.isnan(c.low) else f"{c.change:+.4f}")
        floor = result.floors.get(metric)
        lines.append("| " + " | ".join([result.label(metric), *cells, f"{floor[0]:.4f}" if floor else "-"]) + " |")
    if result.lse:
        lines += ["", "| Re-encode | clips | LSE-C change | LSE-D change |", "|---|---:|---:|---:|"]
        lines += [f"| {r['kind']} ({r['what']}) | {r['clips']} | {r['LSE-C']:+.3f} [{r['LSE-C CI low']:+.3f}, "
                  f"{r['LSE-C CI high']:+.3f}] | {r['LSE-D']:+.3f} [{r['LSE-D CI low']:+.3f}, {r['LSE-D CI high']:+.3f}] |"
                  for r in result.lse]
    lines += ["", *(f"- {n}" for n in [*result.notes, *result.below_floor])]
    return "\n".join(lines) + "\n"


def write(result: Robustness, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "robustness.csv", "w", newline="") as f:
        w = csv_cells.Writer(f)
        w.writerow(["kind", "what", "metric", "change", "CI low", "CI high"])
        w.writerows([[c.kind, c.what, c.metric, *(repr(v) if not math.isnan(v) else "" for v in (c.change, c.low, c.high))]
                     for c in result.changes])
    (out / "robustness.md").write_text(table_markdown(result))
    doc = {"schema": "theval-robustness/1", "changes": [asdict(c) for c in result.changes],
           "floors": {m: {"floor": f, "kind": k} for m, (f, k) in result.floors.items()},
           "lse": result.lse, "notes": result.notes, "below_floor": result.below_floor}
    (out / "robustness.json").write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False) + "\n")
    _heat_map(result, out / "robustness.png")


def _heat_map(result: Robustness, path: Path) -> None:
    """|change| per metric and re-encode, with the values written in (matplotlib, the jobs extra)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(c.kind for c in result.changes))
    metrics = [*METRICS, *GROUPS, rb.FINAL]
    cell = {(c.metric, c.kind): abs(c.change) for c in result.changes}
    grid = np.array([[cell.get((m, k), math.nan) for k in kinds] for m in metrics])
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(kinds), 5.5))
    image = ax.imshow(grid, cmap="cividis", aspect="auto", vmin=0)
    for i in range(len(metrics)):
        for j in range(len(kinds)):
            if not math.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.3f}", ha="center", va="center", fontsize=8,
                        color="white" if grid[i, j] < np.nanmax(grid) / 2 else "black")
    ax.set_xticks(range(len(kinds)), kinds, rotation=30, ha="right")
    ax.set_yticks(range(len(metrics)), [result.label(m) for m in metrics])
    ax.set_title("Re-encoded GT: |normalised score - 1|\n(0: the metric did not move)", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
