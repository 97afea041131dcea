"""Reading and writing score tables: raw metric CSVs (reference layout), leaderboards, published data.

The only module of the scoring package that touches files.
"""
import csv
import io
import math
from importlib import resources
from pathlib import Path

from theval_mesh.pure import csv_cells
from theval_mesh.pure.metrics.registry import NATURALNESS, QUALITY, REGISTRY, SYNCHRONIZATION
from theval_mesh.pure.scoring.compat import PUBLISHED_PROVENANCE
from theval_mesh.pure.scoring.errors import ScoringError
from theval_mesh.pure.scoring.final_score import Leaderboard, RawRow
from theval_mesh.pure.scoring.names import FINAL, GROUPS, METRICS, canonical_metric

COUNT_PREFIX = "n:"  # count columns "n:<metric>" come after the 8 metrics
CI_LOW, CI_HIGH = " CI low", " CI high"  # leaderboard.csv's interval columns: "<name> CI low", after "Note"
DATA_PACKAGE = "theval_mesh"
SHORT = {  # terminal column headers
    **{m.name: m.short for m in REGISTRY},
    QUALITY: "Qual", NATURALNESS: "Nat", SYNCHRONIZATION: "Sync", FINAL: "FINAL",
}


# ------------------------------------------------------------------------------ raw metric CSVs
def read_raw_csv(path, model_column: str = "Model") -> list[RawRow]:
    """Rows of a raw metric CSV as written by the reference code or write_raw_csv.

    Model names come from `model_column`, else from the first column when it is not a metric.
    Metric columns may use any alias; other columns are ignored; "n:<metric>" columns give counts.
    An empty or "nan" cell is NaN (no video had that metric).
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return _parse_raw(f.read(), str(path), model_column)
    except OSError as err:
        raise ScoringError(f"cannot read raw metrics {path}: {err.strerror}") from None


def _parse_raw(text: str, source: str, model_column: str = "Model") -> list[RawRow]:
    lines = [[csv_cells.from_cell(c) for c in r] for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    if not lines:
        raise ScoringError(f"{source}: empty file, expected a header and one row per model")
    header = [h.strip() for h in lines[0]]
    if model_column in header:
        model_index = header.index(model_column)
    elif canonical_metric(header[0]) is None:  # reference code: first column is the index
        model_index = 0
    else:
        raise ScoringError(f"{source}: no {model_column!r} column and the first column is a "
                           "metric; add a column with the model names")

    metric_at, count_at = {}, {}
    for i, name in enumerate(header):
        if i == model_index:
            continue
        is_count = name.lower().startswith(COUNT_PREFIX)
        metric = canonical_metric(name[len(COUNT_PREFIX):] if is_count else name)
        if metric is None:
            continue  # extra columns are ignored, as in the reference code
        target = count_at if is_count else metric_at
        if metric in target:
            raise ScoringError(f"{source}: columns {header[target[metric]]!r} and {name!r} "
                               f"both give {metric}")
        target[metric] = i
    missing = [m for m in METRICS if m not in metric_at]
    if missing:
        raise ScoringError(f"{source}: missing required metric column(s): {', '.join(missing)}")

    rows, seen = [], set()
    for line_no, cells in enumerate(lines[1:], start=2):
        cells = [c.strip() for c in cells] + [""] * (len(header) - len(cells))  # short row: empty
        model = cells[model_index]
        if not model:
            raise ScoringError(f"{source}: line {line_no} has no model name")
        if model in seen:
            raise ScoringError(f"{source}: model {model!r} appears more than once")
        seen.add(model)
        where = f"{source}: row {model!r} (line {line_no}), column"
        values = {m: _number(cells[i], f"{where} {header[i]!r}") for m, i in metric_at.items()}
        counts = None
        if count_at:
            counts = {m: _count(cells[i], f"{where} {header[i]!r}")
                      for m, i in count_at.items() if cells[i]}
        rows.append(RawRow(model=model, values={m: values[m] for m in METRICS}, counts=counts))
    return rows


def _number(text: str, where: str) -> float:
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise ScoringError(f"{where}: {text!r} is not a number") from None


def _count(text: str, where: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value.is_integer() or value < 0:
        raise ScoringError(f"{where}: {text!r} is not a video count")
    return int(value)


def write_raw_csv(rows, path) -> None:
    """Reference layout (Model + the 8 metrics, so the reference code reads it), then counts."""
    rows = list(rows)
    with_counts = any(r.counts for r in rows)
    header = ["Model", *METRICS] + ([COUNT_PREFIX + m for m in METRICS] if with_counts else [])
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv_cells.Writer(f)
        writer.writerow(header)
        for r in rows:
            values = {canonical_metric(k): v for k, v in r.values.items()}
            line = [r.model] + [repr(float(values[m])) for m in METRICS]  # repr: exact round trip
            if with_counts:
                counts = r.counts or {}
                line += [str(counts[m]) if m in counts else "" for m in METRICS]
            writer.writerow(line)


# ------------------------------------------------------------------------------ published data
def _data_text(name: str) -> str:
    return resources.files(DATA_PACKAGE).joinpath("data").joinpath(name).read_text(encoding="utf-8-sig")


def published_gt() -> RawRow:
    """The published GT row (THEval dataset, reference code), with provenance source=published."""
    (row,) = _parse_raw(_data_text("published_gt_metrics.csv"), "published_gt_metrics.csv")
    return RawRow(model=row.model, values=row.values, counts=None,
                  provenance=dict(PUBLISHED_PROVENANCE))


def published_leaderboard() -> list[dict]:
    """Published leaderboard rows: {"model", "type", "scores": {metric: float}, "final"}."""
    out = []
    for r in csv.DictReader(io.StringIO(_data_text("published_leaderboard.csv"))):
        out.append({"model": r["Model"], "type": r["Type"],
                    "scores": {m: float(r[m]) for m in METRICS}, "final": float(r[FINAL])})
    return out


def published_human_correlation() -> tuple[list[str], dict]:
    """The paper's Table 2 as printed: its header, and metric -> row (cells as text)."""
    reader = csv.DictReader(io.StringIO(_data_text("published_human_correlation.csv")))
    rows = {r["Metric"]: r for r in reader}
    return list(reader.fieldnames), rows


# ------------------------------------------------------------------------------ leaderboards
def _fmt(value, decimals: int, nan: str) -> str:
    return nan if math.isnan(value) else f"{value:.{decimals}f}"


def _columns(row, decimals: int, nan: str) -> list[str]:
    numbers = ([row.scores[m] for m in METRICS] + [row.groups[g] for g in GROUPS] + [row.final])
    return [_fmt(v, decimals, nan) for v in numbers]


def _videos(counts) -> str:
    """Videos behind the means, compactly: "n=30", or "n=28..30" when metrics differ."""
    numbers = [counts[m] for m in METRICS if m in counts] if counts else []
    if not numbers:
        return "-"
    low, high = min(numbers), max(numbers)
    return f"n={low}" if low == high else f"n={low}..{high}"


def _rank(row) -> str:
    return "GT" if row.is_gt else ("-" if row.rank is None else str(row.rank))


def _intervals(board: Leaderboard, row) -> dict:
    """name (metric, group, FINAL) -> (low, high) of a row's bootstrap intervals; only the
    intervals the board has, for a model row (the GT's normalised scores are 1 by definition)."""
    ci = board.uncertainty.rows.get(row.model) if board.uncertainty is not None and not row.is_gt else None
    if ci is None:
        return {}
    return {**ci.normalised, **ci.groups, **({FINAL: ci.final} if ci.final is not None else {})}


def ci_columns() -> list[str]:
    """leaderboard.csv's interval columns, after "Note": "<name> CI low", "<name> CI high" for the
    8 normalised scores, the 3 groups and the Final score."""
    return [name + end for name in (*METRICS, *GROUPS, FINAL) for end in (CI_LOW, CI_HIGH)]


SETUP_COLUMN = "Scoring setup"
PROXY_NOTE = "training-free proxy, not the paper's quality models"


def setup_text(setup) -> str:
    """How a run's setup stands against the published figures' (setup: the provenance's
    published_gt_blockers, each a difference)."""
    return ("not comparable with the published figures: " + "; ".join(setup) if setup
            else "the published figures' setup")


def write_leaderboard_csv(board: Leaderboard, path, decimals: int = 4, setup=()) -> None:
    """Rank, Model, 8 normalised scores, 3 groups, Final score, "n:<metric>" counts, Note, then
    the bounds of each score's bootstrap interval (ci_columns; blank for the GT row and where there
    is no interval), then the scoring setup (setup_text of `setup`) on every row: a table cut out
    of the file keeps its label."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv_cells.Writer(f)
        writer.writerow(["Rank", "Model", *METRICS, *GROUPS, FINAL,
                         *(COUNT_PREFIX + m for m in METRICS), "Note", *ci_columns(), SETUP_COLUMN])
        for row in board.rows:
            counts = row.counts or {}
            rank = "" if row.rank is None else str(row.rank)  # numeric column: blank when unranked
            intervals = _intervals(board, row)
            bounds = [_fmt(bound, decimals, "") for name in (*METRICS, *GROUPS, FINAL)
                      for bound in intervals.get(name, (math.nan, math.nan))]
            writer.writerow([rank, row.model, *_columns(row, decimals, "nan"),
                             *(str(counts[m]) if m in counts else "" for m in METRICS),
                             "ground truth" if row.is_gt else row.note, *bounds, setup_text(setup)])


def _weights_line(board: Leaderboard) -> str:
    changed = [f"{m}={w:g}" for m, w in board.weights.items() if w != 1.0]
    return f"Weights: {', '.join(changed)} (others 1)" if changed else ""


ONE_VIDEO = "n=1, no interval"


def _ci(board: Leaderboard, row, decimals: int) -> list[str]:
    """The Final score's interval column, when the board has one."""
    if board.uncertainty is None:
        return []
    interval = board.uncertainty.rows.get(row.model)
    if row.model in board.uncertainty.single and not row.is_gt:
        return [ONE_VIDEO]
    if interval is None or interval.final is None or math.isnan(interval.final[0]):
        return ["-"]
    return [f"[{interval.final[0]:.{decimals}f}, {interval.final[1]:.{decimals}f}]"]


def _ci_header(board: Leaderboard) -> list[str]:
    return [] if board.uncertainty is None else [f"{board.uncertainty.level:.0%} CI"]


def _uncertainty_lines(board: Leaderboard) -> list[str]:
    b = board.uncertainty
    if b is None:
        return []
    gt = "GT resampled too" if b.gt_resampled else "GT fixed"
    single = [f"{m}: {ONE_VIDEO} (the resamples of one video are that video)" for m in b.single]
    return ([f"CI: {b.level:.0%} bootstrap over videos, {b.resamples} resamples, seed {b.seed}, {gt}"]
            + single + [c.note(b.level) for c in b.comparisons if not c.apart])


def leaderboard_markdown(board: Leaderboard, decimals: int = 4) -> str:
    header = ["Rank", "Model", *METRICS, *GROUPS, FINAL, *_ci_header(board), "Videos"]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---:", "---"] + ["---:"] * (len(header) - 2)) + "|"]
    for row in board.rows:
        cells = [_rank(row), row.model.replace("|", "\\|"), *_columns(row, decimals, "n/a"),
                 *_ci(board, row, decimals), _videos(row.counts)]
        lines.append("| " + " | ".join(cells) + " |")
    extra = [line for line in [_weights_line(board)] if line]
    extra += [f"- {line}" for line in _uncertainty_lines(board)]
    extra += [f"- Note, {r.model}: {r.note}" for r in board.rows if r.note]
    extra += [f"- **Warning**: {w}" for w in board.warnings]
    return "\n".join(lines + ([""] + extra if extra else [])) + "\n"


def format_leaderboard_text(board: Leaderboard, decimals: int = 4) -> str:
    """Aligned plain-text table for the terminal, with a legend, notes and warnings."""
    header = ["Rank", "Model"] + [SHORT[c] for c in (*METRICS, *GROUPS, FINAL)] + _ci_header(board) + ["Videos"]
    table = [header] + [[_rank(r), r.model, *_columns(r, decimals, "n/a"), *_ci(board, r, decimals),
                         _videos(r.counts)] for r in board.rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    out = []
    for line in table:
        cells = [c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells).rstrip())
    out.append("")
    out.append("Legend: " + ", ".join(f"{SHORT[c]}={c}" for c in (*METRICS, *GROUPS, FINAL)))
    out += [line for line in [_weights_line(board)] if line]
    out += _uncertainty_lines(board)
    out += [f"note: {r.model}: {r.note}" for r in board.rows if r.note]
    out += [f"WARNING: {w}" for w in board.warnings]
    return "\n".join(out)


# ------------------------------------------------------------------------------ LaTeX
LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 "<": r"\textless{}", ">": r"\textgreater{}", "\n": " ", "\r": " ", "\t": " "}
DAGGER = r"$^\dagger$"  # a column from the training-free proxy
UP = r"$\uparrow$"  # normalised scores, groups and the Final score: higher is better (1 = like the GT)
# leaderboard.tex's column headers, short enough for a page; a legend row under the table spells them out.
LATEX_SHORT = {**{m.name: m.short for m in REGISTRY}, QUALITY: "Qual.", NATURALNESS: "Nat.",
               SYNCHRONIZATION: "Sync.", FINAL: "Final"}


def latex_escape(text: str) -> str:
    """Text as LaTeX prints it literally (model names: "a_b & c" -> "a\\_b \\& c")."""
    return "".join(LATEX_SPECIAL.get(c, c) for c in str(text))


def tex_number(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    return "$-$" + text[1:] if text.startswith("-") else text  # a minus sign, not a hyphen


def leaderboard_latex(board: Leaderboard, decimals: int = 3, setup=(), proxies=(), groups_only: bool = False) -> str:
    """The leaderboard as a booktabs LaTeX tabular (needs only \\usepackage{booktabs}): one row per
    model, the GT first as a reference line; the 8 normalised scores, the 3 groups and the Final
    score, each cell "mean $\\pm$ half-width" of its bootstrap interval (half-width = (high - low)/2;
    the percentile interval is asymmetric in general, leaderboard.csv and results.json hold both
    bounds), the best ranked model per column in bold, "--" where there is no value. To fit a page,
    two header rows (each group over its metrics, then short names) and a legend row of the short
    names under the table; groups_only: the 3 groups and the Final score alone (one column of a
    two-column paper). The columns of `proxies` carry a dagger, and rows under the table say what
    the dagger means and how the setup differs from the published one (`setup`, as
    write_leaderboard_csv's): pasted into a paper, the table keeps its labels."""
    names = [*GROUPS, FINAL] if groups_only else [*METRICS, *GROUPS, FINAL]
    ranked = [r for r in board.rows if not r.is_gt and r.rank is not None]

    def value(row, name):
        return row.final if name == FINAL else row.groups[name] if name in GROUPS else row.scores[name]

    best = {}
    for name in names:
        shown = [round(value(r, name), decimals) for r in ranked if not math.isnan(value(r, name))]
        best[name] = max(shown) if shown else None

    def cell(row, name, intervals):
        v = value(row, name)
        if math.isnan(v):
            return "--"
        text = tex_number(v, decimals)
        low, high = intervals.get(name, (math.nan, math.nan))
        if not (math.isnan(low) or math.isnan(high)):
            text += r" $\pm$ " + tex_number((high - low) / 2, decimals)
        bold = not row.is_gt and row.rank is not None and round(v, decimals) == best[name]
        return rf"\textbf{{{text}}}" if bold else text

    b = board.uncertainty
    lines = ["% THEval leaderboard (theval evaluate). Needs \\usepackage{booktabs}.",
             ("% Normalised scores 1 - |x - GT| / |GT| (1 = like the GT, not clamped: may be below 0), "
              "their group means and the Final score; higher is better."),
             (f"% Each cell: mean $\\pm$ half-width of its {b.level:.0%} percentile bootstrap interval over "
              f"videos ({b.resamples} resamples, seed {b.seed}); half-width = (high - low) / 2. The interval is "
              "asymmetric in general: leaderboard.csv and results.json give both bounds."
              if b is not None else "% No bootstrap intervals: each cell is the mean."),
             "% Bold: the best ranked model per column; --: no value.",
             ("% One column of a two-column paper." if groups_only else
              "% A two-column paper's full width: \\begin{table*} with \\footnotesize; the groups alone: "
              "leaderboard_groups.tex.")]
    lines += [f"% {line}" for line in [_weights_line(board)] if line]
    lines += [f"% WARNING: {' '.join(w.split())}" for w in board.warnings]
    spans = ([] if groups_only else [(g, len(members)) for g, members in GROUPS.items()]) + [("Groups", len(GROUPS))]
    top, rules, column = ["", ""], [], 3
    for title, width in spans:
        top.append(rf"\multicolumn{{{width}}}{{c}}{{{latex_escape(title)}}}")
        rules.append(rf"\cmidrule(lr){{{column}-{column + width - 1}}}")
        column += width
    # A group or the Final score that averages a proxy's column is marked too.
    marked = {*proxies, *(g for g, members in GROUPS.items() if set(members) & set(proxies)),
              *([FINAL] if proxies else [])}
    header = ["Rank", "Model"] + [f"{latex_escape(LATEX_SHORT[n])}{DAGGER if n in marked else ''} {UP}" for n in names]
    lines += [r"\begin{tabular}{rl" + "c" * len(names) + "}", r"\toprule", " & ".join(top + [""]) + r" \\",
              " ".join(rules), " & ".join(header) + r" \\", r"\midrule"]
    gt_rows = [r for r in board.rows if r.is_gt]
    for row in board.rows:
        intervals = _intervals(board, row)
        cells = [_rank(row).replace("-", "--"), latex_escape(row.model), *(cell(row, n, intervals) for n in names)]
        lines.append(" & ".join(cells) + r" \\")
        if row.is_gt and row is gt_rows[-1] and len(board.rows) > len(gt_rows):
            lines.append(r"\midrule")  # the GT: a reference line above the models
    lines.append(r"\bottomrule")
    legend = "; ".join(f"{LATEX_SHORT[n]}: {n}" for n in names if LATEX_SHORT[n] != n)
    notes = ([latex_escape(legend) + "."] + ([f"{DAGGER} {PROXY_NOTE} (or a mean that includes one)."] if proxies else [])
             + ([latex_escape(setup_text(setup)) + "."] if setup else []))
    width = 2 + len(names)
    lines += [rf"\multicolumn{{{width}}}{{p{{0.95\linewidth}}}}{{\footnotesize {n}}} \\" for n in notes]
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"
