"""The files an evaluation writes: per-video results (with each video's normalised scores), the
raw table, the leaderboard (CSV with the interval bounds, Markdown, booktabs LaTeX), results.json
(the leaderboard with its confidence intervals, settings, provenance and counts; schema in
data/results.schema.json), a plot (PNG at 300 dpi, and SVG)."""
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from theval_mesh.core import aggregate
from theval_mesh.core.incidents import logged_internal
from theval_mesh.core.preflight import pairing_of
from theval_mesh.core.provenance import headline
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.outputs.run_files import RESULTS_JSON, RUN, describe
from theval_mesh.outputs.whole_files import replacing, write_text
from theval_mesh.pure import csv_cells
from theval_mesh.pure.errors import NotRanked, UserError
from theval_mesh.pure.metrics.registry import REGISTRY
from theval_mesh.pure.scoring import tables
from theval_mesh.pure.scoring.compat import PUBLISHED_BLOCKERS
from theval_mesh.pure.scoring.final_score import Leaderboard, RawRow, below_zero_driver, video_scores
from theval_mesh.pure.scoring.names import METRICS, NAME_OF_KEY
from theval_mesh.pure.version import VERSION

RESULTS_SCHEMA = Path(__file__).resolve().parents[1] / "data" / "results.schema.json"
SCHEMA_ID = "theval-results/1"

RESULTS_JSONL = "results.jsonl"
# What write_all writes: name -> file in the results folder.
FILES = {"results_jsonl": RESULTS_JSONL, "results_csv": "results.csv", "raw_metrics": "raw_metrics.csv",
         "leaderboard_csv": "leaderboard.csv", "leaderboard_md": "leaderboard.md", "plot": "leaderboard.png",
         "run": "run.json", "results_json": RESULTS_JSON, "leaderboard_tex": "leaderboard.tex",
         "leaderboard_groups_tex": "leaderboard_groups.tex",
         "plot_svg": "leaderboard.svg"}
PLOT_DPI = 300  # leaderboard.png at print resolution; leaderboard.svg beside it scales without loss
BAR_COLOUR = "#0072B2"  # Okabe-Ito blue: the Final-score bars
HEAT_MAP = "cividis"  # perceptually uniform, readable with any colour vision deficiency
OUTLIER_COLOUR = "#D55E00"  # Okabe-Ito vermillion: a score below the heat map's scale


def _video_scores(r: VideoResult, board: Leaderboard | None) -> tuple[dict, float]:
    """A scored video's normalised scores (by metric key) and Final score; NaN for a failed one,
    and for every video when there is no leaderboard (board None)."""
    if r.status != OK or board is None:
        return {m.key: math.nan for m in REGISTRY}, math.nan
    scores, final = video_scores({NAME_OF_KEY[k]: v for k, v in r.metrics.items() if k in NAME_OF_KEY},
                                 board.gt_values, board.weights, board.left_out)
    return {m.key: scores[m.name] for m in REGISTRY}, final


def _number(value) -> str:
    return "" if math.isnan(value) else repr(float(value))


def write_results_csv(results: list[VideoResult], board: Leaderboard | None, path: Path):
    keys = [m.key for m in REGISTRY]
    # beside lip-sync: the audio's offset from the picture (beyond THEval), then the normalised scores
    cols = (["model", "video", "status", "reason"] + keys + ["av_offset_ms", "av_offset_confidence"]
            + [f"norm_{k}" for k in keys] + ["final_score"]
            + ["nan_reasons", "frames_total", "frames_used", "face_frames", "fps", "width", "height",
               "seconds", "warnings", "drift_flags", "provenance"])
    with replacing(path) as new, open(new, "w", newline="") as f:
        w = csv_cells.Writer(f)
        w.writerow(cols)
        for r in sorted(results, key=lambda r: (r.model, r.video)):
            metrics = [_number(r.metrics.get(k, math.nan)) for k in keys]
            scores, final = _video_scores(r, board)
            offset = [_number(r.av_offset.get(k, math.nan)) for k in ("ms", "confidence")]
            w.writerow([r.model, r.video, r.status, r.reason or ""] + metrics + offset
                       + [_number(scores[k]) for k in keys] + [_number(final)] + [
                "; ".join(f"{k}: {v}" for k, v in r.nan_reasons.items()), r.frames_total, r.frames_used,
                r.face_frames, r.fps, r.width, r.height, r.seconds,
                " | ".join(w for w in r.warnings if not w.startswith("Traceback")),
                " | ".join(r.drift.get("flags", [])), json.dumps(r.provenance, sort_keys=True)])


def _jsonl_line(r: VideoResult, board: Leaderboard | None) -> str:
    scores, final = _video_scores(r, board)
    line = json.loads(r.to_json())
    line["normalised"] = {k: _finite(v) for k, v in scores.items()}
    line["final_score"] = _finite(final)
    return json.dumps(line, sort_keys=True)


def _finite(value):
    """JSON has no NaN: null."""
    return None if value is None or math.isnan(value) else float(value)


def _pair(interval) -> list:
    return [_finite(interval[0]), _finite(interval[1])]


def results_document(board: Leaderboard | None, rows, results: list[VideoResult], run_info: dict,
                     not_ranked: str | None = None, run: dict | None = None) -> dict:
    """results.json: what a paper's table needs, machine-readable (data/results.schema.json).
    board None: no leaderboard could be formed, for the reason `not_ranked` (the counts, settings
    and provenance are still there; the per-video values are in results.jsonl). run: the files
    written before it (outputs.run_files)."""
    b = board.uncertainty if board else None
    raw = {row.model: row for row in rows}
    entries = []
    for r in board.rows if board else ():
        ci = b.rows.get(r.model) if b else None
        counts = r.counts or {}

        def figure(value, interval):
            return {"value": _finite(value), "ci": _pair(interval) if interval else None}
        entries.append({
            "model": r.model, "rank": r.rank, "is_gt": r.is_gt, "note": r.note,
            "final": figure(r.final, ci.final if ci else None),
            "groups": {g: figure(v, ci.groups.get(g) if ci else None) for g, v in r.groups.items()},
            "normalised": {m: figure(r.scores[m], ci.normalised.get(m) if ci else None) for m in METRICS},
            "raw": {m: {**figure(raw[r.model].values[m], ci.raw.get(m) if ci else None),
                        "videos": counts.get(m)} for m in METRICS},
        })
    per_model = {}
    for result in results:
        c = per_model.setdefault(result.model, {"videos": 0, "scored": 0, "failed": 0})
        c["videos"] += 1
        c["scored" if result.status == OK else "failed"] += 1
    return {
        "schema": SCHEMA_ID, "theval": VERSION, "created_unix": time.time(),
        "job": run_info.get("job"),
        "gt": {"name": board.gt_name if board else run_info.get("gt_name", "GT"), "source": run_info.get("gt")},
        "models": run_info.get("models", {}), "settings": run_info.get("settings", {}),
        "provenance": run_info.get("provenance") or {}, "weights": board.weights if board else None,
        "proxy_quality": _proxies(run_info.get("provenance")),
        "warnings": board.warnings if board else [],
        "left_out": board.left_out if board else [],
        "pairing": run_info.get("pairing", {}),
        "not_ranked": not_ranked,
        "counts": {"videos": len(results), "scored": sum(c["scored"] for c in per_model.values()),
                   "failed": sum(c["failed"] for c in per_model.values()), "per_model": per_model},
        "bootstrap": None if b is None else {"resamples": b.resamples, "seed": b.seed, "level": b.level,
                                             "gt_resampled": b.gt_resampled},
        "leaderboard": entries,
        "av_offset": offset_summary(results),
        "comparisons": [] if b is None else [
            {"better": c.better, "worse": c.worse, "difference_ci": _pair(c.difference),
             "paired_items": c.paired_items, "apart": c.apart, "note": "" if c.apart else c.note(b.level)}
            for c in b.comparisons],
        **({RUN: run} if run else {}),
    }


def offset_summary(results: list[VideoResult]) -> dict:
    """Per model, its videos' audio-visual offsets: how many have one, the median, the mean and
    90th percentile of |offset|, and the share beyond one frame of their own video."""
    import numpy as np
    per_model: dict[str, list[tuple[float, float]]] = {}
    for r in results:
        per_model.setdefault(r.model, [])
        if r.status == OK and "ms" in r.av_offset and r.fps:
            per_model[r.model].append((r.av_offset["ms"], 1000.0 / r.fps))
    out = {}
    for model, found in per_model.items():
        ms = np.array([m for m, _ in found])
        frame = np.array([f for _, f in found])
        out[model] = {"videos": len(found)} | ({
            "median_ms": float(np.median(ms)), "mean_abs_ms": float(np.abs(ms).mean()),
            "p90_abs_ms": float(np.percentile(np.abs(ms), 90)), "beyond_one_frame": float((np.abs(ms) > frame).mean())}
            if found else dict.fromkeys(("median_ms", "mean_abs_ms", "p90_abs_ms", "beyond_one_frame")))
    return out


def _proxies(provenance: dict | None) -> list[str]:
    """The metrics (canonical names) a training-free proxy computed, from a run's provenance."""
    quality = (provenance or {}).get("quality") or {}
    return [NAME_OF_KEY.get(k, k) for k, d in quality.items() if str(d).startswith("proxy:")]


def _ink(rgba) -> str:
    """Black or white text, whichever reads on a cell of this colour (its relative luminance)."""
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3])
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.18 else "white"


def setup_labels(provenance: dict | None) -> tuple[list[str], list[str]]:
    """(how the run's setup differs from the published figures', the metrics a proxy computed):
    what every table of the run is labelled with."""
    return list((provenance or {}).get(PUBLISHED_BLOCKERS) or []), _proxies(provenance)


def write_leaderboard_tex(board: Leaderboard, path: Path, provenance: dict | None = None,
                          groups_only: bool = False) -> None:
    """leaderboard.tex (leaderboard_groups.tex: groups_only): the booktabs table of
    tables.leaderboard_latex, labelled (setup_labels)."""
    setup, proxies = setup_labels(provenance)
    write_text(path, tables.leaderboard_latex(board, setup=setup, proxies=proxies, groups_only=groups_only))


def plot_leaderboard(board: Leaderboard, path: Path, proxies=(), svg: Path | None = None):
    """leaderboard.png at PLOT_DPI, and the same figure as `svg` when given."""
    import matplotlib.pyplot as plt
    fig = leaderboard_figure(board, proxies)
    try:
        with replacing(path) as new:
            fig.savefig(new, dpi=PLOT_DPI)
        if svg is not None:
            with replacing(svg) as new:
                fig.savefig(new, format="svg")
    finally:
        plt.close(fig)


def _scale(values) -> tuple[float, float]:
    """An axis that holds every value, 0 and 1 (the Final-score bars and their intervals)."""
    finite = [v for v in values if math.isfinite(v)]
    return min([0.0, *finite]), max([1.0, *finite])


FAR_OUT = 3.0  # Tukey's far-out fence: below Q1 - 3 IQR


def heat_scale(values) -> tuple[float, float]:
    """The heat map's colour scale: 0 (or the lowest score that is not an outlier, when lower) to 1.
    A score below 0 means a raw mean further from the GT's than the GT's own value; one far-out
    score (-10, say) would otherwise stretch the scale until 0.76 and 1.00 look alike. Scores
    below the scale are drawn in the outlier colour with their value."""
    import numpy as np
    finite = np.array([v for v in values if math.isfinite(v)])
    if finite.size == 0:
        return 0.0, 1.0
    q1, q3 = np.percentile(finite, [25, 75])
    inside = finite[finite >= q1 - FAR_OUT * (q3 - q1)]
    return min(0.0, float(inside.min())), max(1.0, float(finite.max()))


def leaderboard_figure(board: Leaderboard, proxies=()):
    """Normalised scores per model and metric as a heat map (HEAT_MAP, its scale covering every
    score), with the Final score (and its interval) beside it; the columns a proxy computed are
    labelled so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in board.rows if not r.is_gt] or board.rows
    grid = np.array([[r.scores.get(m, math.nan) for m in METRICS] for r in rows])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 1.6 + 0.45 * len(rows)),
                                 gridspec_kw={"width_ratios": [4, 1]})
    vmin, vmax = heat_scale(grid.ravel())
    outliers = bool((grid < vmin).any())
    cmap = matplotlib.colormaps[HEAT_MAP].with_extremes(under=OUTLIER_COLOUR)
    norm = matplotlib.colors.Normalize(vmin=vmin, vmax=vmax)
    im = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
    labels = [f"{m}\n(PROXY)" if m in proxies else m for m in METRICS]
    ax.set_xticks(range(len(METRICS)), labels, rotation=30, ha="right", fontsize=8)
    for tick, metric in zip(ax.get_xticklabels(), METRICS):
        if metric in proxies:
            tick.set_color("#CC79A7")  # Okabe-Ito reddish purple
    ax.set_yticks(range(len(rows)), [r.model for r in rows], fontsize=8)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if not math.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color=_ink(cmap(norm(grid[i, j]))))
    title = "normalised score per metric (1 = like GT)"
    if proxies:
        title += f"; PROXY: {', '.join(proxies)} from the training-free proxy, not the paper's models"
    if outliers:
        title += f"\noutliers below {vmin:.2f} in vermillion, their value printed"
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03, extend="min" if outliers else "neither")
    finals = np.array([r.final for r in rows])
    ci = {m: i.final for m, i in board.uncertainty.rows.items() if i.final} if board.uncertainty else {}
    low = np.array([ci[r.model][0] if r.model in ci else math.nan for r in rows])
    high = np.array([ci[r.model][1] if r.model in ci else math.nan for r in rows])
    errors = np.nan_to_num(np.array([finals - low, high - finals]), nan=0.0).clip(min=0)
    bx.barh(range(len(rows)), finals, color=BAR_COLOUR, xerr=errors if ci else None, ecolor="black", capsize=2)
    left, right = _scale(np.concatenate([finals, low, high]))  # every bar and every interval
    pad = 0.2 * (right - left)  # room for the value beside the bar
    for i, (f, row) in enumerate(zip(finals, rows)):
        if not math.isnan(f):
            driver = below_zero_driver(row.scores, board.weights)  # the metric behind a Final below 0
            bx.text(max(f if math.isnan(high[i]) else high[i], 0) + 0.02 * (right - left), i,
                    f"{f:.3f}" + (f" ({driver})" if driver else ""), va="center", fontsize=7)
    bx.set_yticks(range(len(rows)), [])
    bx.invert_yaxis()
    ax.set_ylim(len(rows) - 0.5, -0.5)
    bx.set_xlim(left - (0.05 * (right - left) if left < 0 else 0), right + pad)
    if left < 0:
        bx.axvline(0, color="black", linewidth=0.6)
    level = f" ({board.uncertainty.level:.0%} CI)" if board.uncertainty else ""
    bx.set_title(f"Final score{level}", fontsize=9)
    fig.tight_layout()
    return fig


def _write_per_video(out: Path, results: list[VideoResult], board: Leaderboard | None) -> list[str]:
    """results.jsonl and results.csv (with the board's columns when there is one)."""
    write_text(out / FILES["results_jsonl"], "".join(_jsonl_line(r, board) + "\n" for r in results))
    write_results_csv(results, board, out / FILES["results_csv"])
    return [FILES["results_jsonl"], FILES["results_csv"]]


def _write_raw_csv(rows, path: Path):
    with replacing(path) as new:
        tables.write_raw_csv(rows, new)


def _write_results_json(out: Path, written: list[str], board: Leaderboard | None, rows, results: list[VideoResult],
                        run_info: dict, not_ranked: str | None = None) -> None:
    """results.json, last: it names the run and every file written before it."""
    document = results_document(board, rows, results, run_info, not_ranked, run=describe(out, written))
    write_text(out / FILES["results_json"], json.dumps(document, indent=1, sort_keys=True, allow_nan=False,
                                                       default=str))


def write_all(out: Path, results: list[VideoResult], rows, board: Leaderboard, run_info: dict) -> dict:
    """Write every output file; return name -> path."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / file for name, file in FILES.items()}
    _write_per_video(out, results, board)
    _write_raw_csv(rows, paths["raw_metrics"])
    scored = next((r for r in results if r.provenance), None)
    provenance = run_info.get("provenance") or (scored.provenance if scored else None)
    setup, proxies = setup_labels(provenance)
    with replacing(paths["leaderboard_csv"]) as new:
        tables.write_leaderboard_csv(board, new, setup=setup)
    top = f"{headline(scored.provenance)}\n\n" if scored else ""
    if setup:  # the same sentence, starting a line (capitalize() would lower the rest)
        text = tables.setup_text(setup)
        top += f"{text[0].upper()}{text[1:]}.\n\n"
    write_text(paths["leaderboard_md"], top + tables.leaderboard_markdown(board))
    write_leaderboard_tex(board, paths["leaderboard_tex"], provenance)
    write_leaderboard_tex(board, paths["leaderboard_groups_tex"], provenance, groups_only=True)
    plot_leaderboard(board, paths["plot"], proxies, svg=paths["plot_svg"])
    write_text(paths["run"], json.dumps(run_info, indent=2, sort_keys=True, default=str))
    _write_results_json(out, [f for f in FILES.values() if f != FILES["results_json"]],
                        board, rows, results, run_info)
    return paths


@dataclass
class Written:
    """What write_results wrote, and the figures behind it."""
    board: Leaderboard
    results: list[VideoResult]
    rows: list[RawRow]  # each input's raw means (GT first), as in raw_metrics.csv
    paths: dict[str, Path]


def write_results(out: Path, store, job) -> Written:
    """From a job's committed results to every output file and the leaderboard (`theval evaluate`,
    `theval bulk results`), written to `out`, each file once. When no leaderboard can be formed (or
    forming it fails), the per-video files are still written, with raw_metrics.csv and
    results.json when those could be, and NotRanked says which; the job store keeps every result
    whatever happens here (`theval bulk results` writes the files again)."""
    spec = job.spec
    results = list(store.results(job.id))
    names = [name for name, _ in spec.inputs]
    out.mkdir(parents=True, exist_ok=True)
    gt_videos = [r.video for r in results if r.model == spec.gt_name]
    pairing = {name: pairing_of(name, [r.video for r in results if r.model == name], gt_videos).to_dict()
               for name, _ in spec.inputs[1:]}
    run_info = {"job": job.id, "gt": spec.inputs[0][1], "gt_name": spec.gt_name, "models": dict(spec.inputs[1:]),
                "settings": spec.settings, "workers": spec.workers, "partial_score": spec.partial_score,
                "pairing": pairing}
    rows: list[RawRow] = []
    try:
        rows = aggregate.model_rows(results, names)
        run_info["provenance"] = rows[0].provenance
        if rows[0].provenance is None:
            raise UserError("no GT video could be scored, so there is nothing to compare with")
        board = aggregate.ranked(results, names, spec.gt_name, spec.weights, rows=rows, partial=spec.partial_score)
    except UserError as err:
        reason = str(err)
    except Exception as err:  # noqa: BLE001 - whatever breaks the aggregation, the scored videos are kept
        reason = f"forming the leaderboard failed: {logged_internal(err, 'aggregation')}"
    else:
        run_info["warnings"] = board.warnings
        return Written(board, results, rows, write_all(out, results, rows, board, run_info))
    written = _write_per_video(out, results, None)
    if rows:
        _write_raw_csv(rows, out / FILES["raw_metrics"])
        written.append(FILES["raw_metrics"])
    _write_results_json(out, written, None, rows, results, run_info, not_ranked=reason)
    written.append(FILES["results_json"])
    missing = [f for f in FILES.values() if f not in written]
    raise NotRanked(reason, out, written, missing, results)
