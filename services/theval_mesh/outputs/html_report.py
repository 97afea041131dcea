"""`theval report RESULTS_DIR`: one self-contained HTML file (no network at view time) from what an
evaluation wrote (results.json, results.jsonl): the sortable leaderboard with its confidence
intervals, a radar chart per model over the 8 normalised metrics (the paper's Figure 3), bars per
dimension with the published leaderboard as an overlay to switch on, and a page per video (mouth
openness against loudness with speech shaded, head angles, eyebrow distance, quality per frame,
thumbnails of the worst frames, NaN reasons). Plots are plotly figures built here; the page only
hands each video's numbers to the per-video figure built here too."""
import html
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from theval_mesh.outputs.results_files import RESULTS_JSONL
from theval_mesh.outputs.run_files import check_folder
from theval_mesh.outputs.whole_files import write_text
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.metrics import classic as lm
from theval_mesh.pure.metrics.registry import FACE_QUALITY, MOUTH_QUALITY, QUALITY, REGISTRY, in_group
from theval_mesh.pure.scoring.compat import PUBLISHED_BLOCKERS
from theval_mesh.pure.scoring.final_score import group_scores
from theval_mesh.pure.scoring.names import FINAL, GROUPS, METRICS, NAME_OF_KEY
from theval_mesh.pure.scoring.tables import CI_HIGH, CI_LOW, published_leaderboard, setup_text

REPORT = "report.html"
THUMBNAILS_PER_MODEL = 10  # videos per model with worst-frame thumbnails: its lowest Final scores
PAGE_POINTS = 120  # points per series in the page (the stored trace has up to 240)
LEVELS = 999  # each series is sent as integers 0..LEVELS over its own range: display precision
QUALITY_KEYS = tuple(m.key for m in in_group(QUALITY))
THUMBNAIL_METRICS = (MOUTH_QUALITY.key, FACE_QUALITY.key)
SERIES = ("mouth_openness", "loudness", "pitch", "yaw", "roll", "eyebrow") + QUALITY_KEYS


def _read(results_dir: Path) -> tuple[dict, list[dict]]:
    doc_path, lines_path = results_dir / "results.json", results_dir / RESULTS_JSONL
    for path in (doc_path, lines_path):
        if not path.is_file():
            raise UserError(f"{path} not found: `theval report` reads the folder an evaluation wrote "
                            "(`theval evaluate ... --out DIR` or `theval bulk results JOB --out DIR`)")
    try:
        doc = json.loads(doc_path.read_text())
        videos = [json.loads(line) for line in lines_path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise UserError(f"cannot read {results_dir}: {err}") from None
    check_folder(results_dir, doc)
    return doc, videos


def _label(metric: str, proxies) -> str:
    return f"{metric} (PROXY)" if metric in proxies else metric


# ------------------------------------------------------------------------------------ figures
def radar_figure(doc: dict):
    """One polar chart per model over the 8 normalised metrics (1 = like the GT), as Figure 3;
    axes carry the short names (full names on hover), proxy ones marked with *; a score below 0
    is drawn at the centre (its value on hover)."""
    from plotly.subplots import make_subplots
    rows = [e for e in doc["leaderboard"] if not e["is_gt"]]
    cols = min(4, max(1, len(rows)))
    n_rows = max(1, math.ceil(len(rows) / cols))
    fig = make_subplots(rows=n_rows, cols=cols, specs=[[{"type": "polar"}] * cols] * n_rows,
                        subplot_titles=[e["model"] for e in rows], vertical_spacing=0.3 / n_rows,
                        horizontal_spacing=0.08)
    proxies = doc["proxy_quality"]
    axes = [m.short + ("*" if m.name in proxies else "") for m in REGISTRY]
    names = [_label(m.name, proxies) for m in REGISTRY]
    for k, e in enumerate(rows):
        values = [e["normalised"][m.name]["value"] for m in REGISTRY]
        drawn = [None if v is None else max(v, 0.0) for v in values]  # below 0: at the centre, true on hover
        hover = [[n, "NaN" if v is None else f"{v:.3f}"] for n, v in zip(names, values)]
        fig.add_scatterpolar(r=drawn + drawn[:1], theta=axes + axes[:1], customdata=hover + hover[:1],
                             fill="toself", name=e["model"], showlegend=False, row=k // cols + 1, col=k % cols + 1,
                             hovertemplate="%{customdata[0]}: %{customdata[1]}<extra>" + html.escape(e["model"])
                             + "</extra>")
    fig.update_polars(radialaxis={"range": [0, 1], "tickfont": {"size": 7}, "angle": 90, "tickangle": 90,
                                  "tickvals": [0.25, 0.5, 0.75, 1]},
                      angularaxis={"tickfont": {"size": 9}, "rotation": 90, "direction": "clockwise"})
    for title in fig.layout.annotations:
        title.update(yshift=28, font={"size": 13})
    fig.update_layout(height=360 * n_rows, margin={"t": 50, "b": 30, "l": 40, "r": 40})
    return fig


def dimension_figure(doc: dict, published: list[dict]):
    """Bars per dimension (3 groups and the Final score) with their intervals; the published
    leaderboard's models as a second set of bars, hidden until switched on in the legend."""
    from plotly.subplots import make_subplots
    dims = list(GROUPS) + [FINAL]
    fig = make_subplots(rows=1, cols=len(dims), subplot_titles=dims, shared_yaxes=True)
    ours = [e for e in doc["leaderboard"] if not e["is_gt"]]
    for j, dim in enumerate(dims, start=1):
        figures = [e["final"] if dim == FINAL else e["groups"][dim] for e in ours]
        value = [f["value"] for f in figures]
        plus = [(f["ci"][1] - f["value"]) if f["ci"] and None not in (f["ci"][1], f["value"]) else 0 for f in figures]
        minus = [(f["value"] - f["ci"][0]) if f["ci"] and None not in (f["ci"][0], f["value"]) else 0 for f in figures]
        fig.add_bar(y=[e["model"] for e in ours], x=value, orientation="h", name="this run", legendgroup="ours",
                    showlegend=j == 1, marker_color="#1f77b4", row=1, col=j,
                    error_x={"type": "data", "array": plus, "arrayminus": minus, "visible": True},
                    hovertemplate="%{y}: %{x:.3f}<extra></extra>")
        if not published:  # none to set beside these results (partial, or scored otherwise)
            continue
        fig.add_bar(y=[p["model"] for p in published], x=[p["final"] if dim == FINAL else p["groups"][dim]
                                                           for p in published],
                    orientation="h", name="published (paper)", legendgroup="published", showlegend=j == 1,
                    marker_color="#bbbbbb", visible="legendonly", row=1, col=j,
                    hovertemplate="%{y} (published): %{x:.3f}<extra></extra>")
    shown = [v for trace in fig.data for v in trace.x if v is not None]
    fig.update_xaxes(range=[min([0.0] + shown) - 0.05, 1.05])
    fig.update_yaxes(autorange="reversed")
    n = len(ours) + len(published)
    fig.update_layout(height=160 + 22 * n, barmode="group", margin={"t": 60, "l": 10, "r": 10},
                      title=f"Per dimension, with {_level(doc)} intervals"
                            + (" (click the legend for the published leaderboard)" if published else ""),
                      legend={"orientation": "h", "y": -0.05})
    return fig


def video_figure(proxies):
    """The per-video figure's layout and empty traces; the page fills x/y with a video's series
    (each trace's meta names its series) and shades the speech."""
    from plotly.subplots import make_subplots
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.07, subplot_titles=[
        "mouth openness and loudness, each min-max scaled (speech green, silence grey)", "head angles (degrees)",
        "eyebrow distance (brow to eye, over eye distance)", "quality per frame (each model's own scale)"])
    lines = [(1, "mouth_openness", "mouth openness"), (1, "loudness", "loudness"), (2, "pitch", "pitch"),
             (2, "yaw", "yaw"), (2, "roll", "roll"), (3, "eyebrow", "eyebrow distance")]
    lines += [(4, key, _label(NAME_OF_KEY[key], proxies)) for key in QUALITY_KEYS]
    for row, key, name in lines:
        fig.add_scatter(x=[], y=[], mode="lines", name=name, meta=key, row=row, col=1,
                        legendgroup=str(row), connectgaps=False)
    fig.update_xaxes(title_text="time (s)", row=4, col=1)
    fig.update_layout(height=760, margin={"t": 40, "l": 50, "r": 10, "b": 40}, legend={"tracegroupgap": 120})
    return fig


def _radar_note(proxies) -> str:
    keys = ", ".join(f"{m.short} = {_label(m.name, proxies)}" for m in REGISTRY)
    return f"Axes: {keys}. Scores below 0 are drawn at the centre (hover for the value)."


def _level(doc: dict) -> str:
    b = doc.get("bootstrap")
    return f"{b['level']:.0%}" if b else "no"


# ------------------------------------------------------------------------------ the data
def _published_rows() -> list[dict]:
    return [{**p, "groups": group_scores(p["scores"])} for p in published_leaderboard()]


def _quantised(values: list, points: int) -> dict | None:
    """{lo, hi, v}: at most `points` of the series as integers 0..LEVELS (None: no value)."""
    if not values:
        return None
    step = max(1, math.ceil(len(values) / points))
    kept = values[::step]
    finite = [v for v in kept if v is not None and math.isfinite(v)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    span = (hi - lo) or 1.0
    return {"lo": lo, "hi": hi, "step": step, "v": [None if v is None or not math.isfinite(v) else
                                                     round((v - lo) / span * LEVELS) for v in kept]}


def _video_entry(k: int, r: dict) -> dict:
    trace = r.get("trace") or {}
    series = {key: _quantised(trace.get(key), PAGE_POINTS) for key in SERIES if trace.get(key)}
    t = _quantised(trace.get("t"), PAGE_POINTS)
    return {
        "id": k, "model": r["model"], "video": r["video"], "status": r["status"], "reason": r.get("reason"),
        "final": r.get("final_score"), "metrics": {NAME_OF_KEY[m]: v for m, v in r["metrics"].items()
                                                   if m in NAME_OF_KEY},
        "normalised": {NAME_OF_KEY[m]: v for m, v in (r.get("normalised") or {}).items() if m in NAME_OF_KEY},
        "nan_reasons": {NAME_OF_KEY.get(m, m): why for m, why in r.get("nan_reasons", {}).items()},
        "warnings": [w for w in r.get("warnings", []) if not w.startswith("Traceback")],
        "drift": (r.get("drift") or {}).get("flags", []),
        "av_offset": r.get("av_offset") or {}, "frames": [r.get("frames_used"), r.get("frames_total")],
        "t": t, "series": series, "speech": trace.get("speech", []),
        "worst": {key: trace.get(f"worst_{key}", []) for key in THUMBNAIL_METRICS}, "thumbs": {},
    }


def _thumbnail_targets(entries: list[dict], per_model: int | None) -> list[dict]:
    """The videos that get thumbnails: each model's `per_model` lowest Final scores (None: all)."""
    by_model: dict[str, list[dict]] = {}
    for e in entries:
        if e["status"] == "ok" and any(e["worst"].values()):
            by_model.setdefault(e["model"], []).append(e)
    chosen = []
    for items in by_model.values():
        items.sort(key=lambda e: math.inf if e["final"] is None else e["final"])
        chosen += items if per_model is None else items[:per_model]
    return chosen


def _add_thumbnails(entries: list[dict], per_model: int | None, progress: bool) -> int:
    from theval_mesh.outputs.thumbnails import frame_thumbnails
    targets = _thumbnail_targets(entries, per_model)

    def one(e):
        frames = [f for key in THUMBNAIL_METRICS for f in e["worst"][key][:1]]
        try:
            shots = frame_thumbnails(e["video"], frames)
        except Exception as err:  # noqa: BLE001 - one unreadable video costs its thumbnails only
            e["thumbs_note"] = f"no thumbnails: {err}"
            return
        e["thumbs"] = {key: shots.get(int(e["worst"][key][0])) for key in THUMBNAIL_METRICS if e["worst"][key]}
    with ThreadPoolExecutor(max_workers=2) as pool:  # PyAV decodes without the GIL
        list(tqdm(pool.map(one, targets), total=len(targets), desc="thumbnails", unit="video",
                  disable=not progress))
    return len(targets)


# ------------------------------------------------------------------------------ the page
def _cell(figure: dict | None, decimals: int = 3) -> str:
    if not figure or figure.get("value") is None:
        return '<td data-v="">NaN</td>'
    v, ci = figure["value"], figure.get("ci")
    interval = (f'<br><span class="ci">[{ci[0]:.{decimals}f}, {ci[1]:.{decimals}f}]</span>'
                if ci and None not in ci else "")
    return f'<td data-v="{v!r}">{v:.{decimals}f}{interval}</td>'


def _leaderboard_table(doc: dict, published: list[dict]) -> str:
    proxies = doc["proxy_quality"]
    counts = doc["counts"]["per_model"]
    head = (["Rank", "Model", "Videos", FINAL] + list(GROUPS)
            + [html.escape(_label(m, proxies)) for m in METRICS])
    out = ['<table id="leaderboard" class="sortable"><thead><tr>']
    out += [f'<th data-col="{k}" title="click to sort">{h}</th>' for k, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    for e in doc["leaderboard"]:
        c = counts.get(e["model"], {})
        videos = f'{c.get("scored", 0)}' + (f' <span class="bad">({c["failed"]} failed)</span>'
                                             if c.get("failed") else "")
        css = "gt" if e["is_gt"] else ""
        out.append(f'<tr class="{css}"><td data-v="{e["rank"] or 0}">{e["rank"] or "GT"}</td>'
                   f'<td data-v="{html.escape(e["model"])}">{html.escape(e["model"])}</td>'
                   f'<td data-v="{c.get("scored", 0)}">{videos}</td>' + _cell(e["final"])
                   + "".join(_cell(e["groups"][g]) for g in GROUPS)
                   + "".join(_cell(e["normalised"][m]) for m in METRICS) + "</tr>")
    for p in published:
        values = [p["final"]] + [p["groups"][g] for g in GROUPS] + [p["scores"][m] for m in METRICS]
        out.append(f'<tr class="published"><td data-v="0">pub.</td><td data-v="{html.escape(p["model"])}">'
                   f'{html.escape(p["model"])} <span class="ci">(published, {html.escape(p["type"])})</span></td>'
                   '<td data-v="0"></td>' + "".join(_cell({"value": v}) for v in values) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _classic_section(doc: dict) -> str:
    """The classic metrics (results.json "classic", written by `theval classic --out` into this
    folder; "legacy" in folders written before the rename): each model's means with their intervals,
    in a paper's column order, and their notes."""
    block = doc.get("classic") or doc.get("legacy")
    if not block:
        return ""
    summary = block["summary"]
    columns = [c for c in lm.TABLE_ORDER if any(r.get(c) is not None for r in summary)]
    arrows = {True: "&uarr;", False: "&darr;"}
    out = ['<section id="classic-section"><h2>Classic metrics (theval classic; not in the Final score)</h2>',
           '<table id="classic" class="sortable"><thead><tr><th>Model</th>']
    out += [f"<th>{html.escape(lm.PUBLISHED_NAMES.get(c, c))} {arrows[lm.HIGHER_IS_BETTER[c]]}</th>" for c in columns]
    out.append("</tr></thead><tbody>")
    for r in summary:
        cells = [_cell({"value": r.get(c), "ci": [r.get(c + CI_LOW), r.get(c + CI_HIGH)]}) for c in columns]
        out.append(f'<tr><td data-v="{html.escape(r["Model"])}">{html.escape(r["Model"])}</td>{"".join(cells)}</tr>')
    out.append("</tbody></table><ul>")
    out += [f'<li{" class=bad" if n.startswith("WARNING") else ""}>{html.escape(n)}</li>'
            for n in [*block["notes"], *block["skipped"]]]
    out.append("</ul></section>")
    return "".join(out)


def _notes(doc: dict) -> str:
    items = [c["note"] for c in doc.get("comparisons", []) if c.get("note")]
    items += doc.get("warnings", [])
    items += doc.get("robustness", {}).get("below_floor", [])
    items += [f"{model}: {p['paired']} of {p['videos']} video(s) pair with a GT video by file name; unpaired: "
              f"{', '.join(p['unpaired'][:5])}" + (", ..." if len(p["unpaired"]) > 5 else "")
              for model, p in doc.get("pairing", {}).items() if p["unpaired"]]
    return "".join(f"<li>{html.escape(n)}</li>" for n in items)


def _provenance(doc: dict) -> str:
    b = doc.get("bootstrap")
    rows = [("GT", f'{doc["gt"]["name"]} ({doc["gt"].get("source") or "published"})'),
            ("Videos", f'{doc["counts"]["scored"]} scored, {doc["counts"]["failed"]} failed'),
            ("Settings", json.dumps(doc.get("settings", {}), sort_keys=True)),
            ("Provenance", json.dumps(doc.get("provenance", {}), sort_keys=True)),
            ("Intervals", f'{b["level"]:.0%} bootstrap over videos, {b["resamples"]} resamples, seed {b["seed"]}'
                          f'{", GT videos resampled too" if b["gt_resampled"] else ""}' if b else "none"),
            ("THEval", doc.get("theval", ""))]
    return "".join(f"<tr><th>{k}</th><td><code>{html.escape(str(v))}</code></td></tr>" for k, v in rows)


# JSON inside <script>: with no '<' the HTML parser cannot meet '</script>' (the end) nor '<!--'
# (which, followed by '<script>', makes a later '</script>' not end the block); '>' and '&' for
# good measure; U+2028/2029 (ensure_ascii escapes them already) are line ends to older JavaScript.
# All of them occur only inside JSON strings, where the \u escapes stand for them.
_SCRIPT_SAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def _json_for_script(value) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).translate(_SCRIPT_SAFE)


def build_report(results_dir, out=None, thumbnails: int | None = THUMBNAILS_PER_MODEL,
                 progress: bool = True, published: bool = False, title: str | None = None) -> Path:
    """Write the report; returns its path (default RESULTS_DIR/report.html). thumbnails: videos per
    model with worst-frame thumbnails (None: every video; 0: none); title: the page's (default
    "THEval report: <folder name>")."""
    import plotly.offline
    results_dir = Path(results_dir)
    doc, videos = _read(results_dir)
    if doc.get("not_ranked"):
        raise UserError(f"{results_dir}: no leaderboard was formed ({doc['not_ranked']}), so there is no report to "
                        "write; the per-video values are in results.csv and results.jsonl")
    # A partial Final score is never set beside the published (full) scores, nor are results scored
    # otherwise than the published figures (the proxy, the rigid fit, stand-in weights, settings).
    differences = (doc.get("provenance") or {}).get(PUBLISHED_BLOCKERS) or []
    forced = published and bool(differences)  # offered anyway: labelled so
    published = [] if doc.get("left_out") or (differences and not forced) else _published_rows()
    proxies = doc["proxy_quality"]
    entries = [_video_entry(k, r) for k, r in enumerate(videos)]
    shown = _add_thumbnails(entries, thumbnails, progress) if thumbnails != 0 else 0
    figures = {"radar": radar_figure(doc), "dimensions": dimension_figure(doc, published),
               "video": video_figure(proxies)}
    banner = ""
    if differences:
        shown = ("is offered (--published) beside these results, which are" if forced
                 else "is not shown beside these results:")
        banner += (f'<p class="proxy">The published leaderboard {shown} '
                   f'{html.escape(setup_text(differences))}.</p>')
    if doc.get("left_out"):
        banner += (f'<p class="proxy">PARTIAL Final score: {html.escape(", ".join(doc["left_out"]))} left out '
                   "(the GT cannot normalise them); not comparable with a full THEval Final score, so the "
                   "published leaderboard is not shown beside it.</p>")
    if proxies:
        banner += (f'<p class="proxy">PROXY: {html.escape(", ".join(proxies))} computed by the training-free '
                  "proxy, not the paper's models: these columns are labelled (PROXY) wherever they show.</p>")
    values = {
        "TITLE": html.escape(title or f"THEval report: {results_dir.name}"), "PLOTLY": plotly.offline.get_plotlyjs(),
        "BANNER": banner, "LEVEL": _level(doc), "TABLE": _leaderboard_table(doc, published),
        "NOTES": _notes(doc), "CLASSIC": _classic_section(doc), "RADAR": html.escape(_radar_note(proxies)), "PROVENANCE": _provenance(doc),
        "THUMBS": "every video" if thumbnails is None else
                  f"the {thumbnails} lowest-scored videos of each model ({shown} videos)",
        "FIGURES": _json_for_script({k: json.loads(f.to_json()) for k, f in figures.items()}),
        "VIDEOS": _json_for_script(entries),
        "META": _json_for_script({"levels": LEVELS, "metrics": list(METRICS), "thumbs": {k: _label(NAME_OF_KEY[k], proxies) for k in THUMBNAIL_METRICS},
                                  "labels": {m: _label(m, proxies) for m in METRICS}}),
    }
    # One pass over the template: a value (a video's name, plotly.js) is never scanned for markers.
    page = re.sub(r"%([A-Z]+)%", lambda m: values[m.group(1)], _template())
    path = Path(out) if out else results_dir / REPORT
    write_text(path, page)
    return path


def _template() -> str:
    return (Path(__file__).resolve().parents[1] / "data" / "report_template.html").read_text(encoding="utf-8")
