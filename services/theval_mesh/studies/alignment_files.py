"""The files of `theval align`: per-model scores (results.json or a leaderboard CSV), human
preferences (pairwise judgements or win rates), and alignment.csv / alignment.json."""
import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from theval_mesh.outputs.run_files import RESULTS_JSON, check_folder
from theval_mesh.pure import csv_cells
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.scoring.alignment import WinRate, format_p, win_rates
from theval_mesh.pure.scoring.final_score import final_score, group_scores
from theval_mesh.pure.scoring.names import FINAL, GROUPS, METRICS, canonical_metric
from theval_mesh.pure.scoring.tables import CI_HIGH, CI_LOW, published_human_correlation

PAIRWISE_COLUMNS = ("model_a", "model_b", "preferred")
WIN_RATE_COLUMNS = ("model", "win_rate")
NOT_SCORES = {"rank", "note", "type"}  # numeric-looking or descriptive columns that are no score
COUNT_PREFIX = "n:"  # leaderboard.csv's video counts


@dataclass
class ScoreTable:
    """A scores table read back: each metric's score per model, from results.json or a leaderboard CSV."""
    source: str
    columns: dict            # metric -> {model: score}, in the published table's row order
    gt: str | None = None    # the GT row's name, left out
    notes: list = field(default_factory=list)


@dataclass
class Human:
    source: str
    kind: str                # "pairwise" or "win_rates"
    rates: dict              # model -> WinRate


# ------------------------------------------------------------------------------ scores
def read_scores(path) -> ScoreTable:
    """A results directory, its results.json, or a leaderboard CSV (published layout)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_JSON
    if not path.is_file():
        raise UserError(f"{path}: not found (--scores takes a results directory, its {RESULTS_JSON}, "
                        "or a leaderboard CSV)")
    if path.suffix.lower() == ".json":
        return _scores_from_results(path)
    return _scores_from_csv(path)


def _scores_from_results(path: Path) -> ScoreTable:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        table = ScoreTable(str(path), _leaderboard_columns(doc["leaderboard"], doc["gt"]["name"]), doc["gt"]["name"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"{path}: not a results.json written by `theval evaluate` "
                        f"({type(err).__name__}: {err})") from None
    check_folder(path.parent, doc)
    return table


def _leaderboard_columns(board: list, gt: str) -> dict:
    """metric -> {model: value} of results.json's leaderboard entries (normalised scores, groups,
    Final score; null as NaN), the GT's left out."""
    columns = {m: {} for m in (*METRICS, *GROUPS, FINAL)}
    for entry in board:
        if entry["is_gt"] or entry["model"] == gt:
            continue
        figures = {**entry["normalised"], **entry["groups"], FINAL: entry["final"]}
        for name in columns:
            value = figures[name]["value"]
            columns[name][entry["model"]] = math.nan if value is None else float(value)
    return columns


def _read_csv(path: Path) -> tuple[list[str], list[dict]]:
    """The header and the rows of a CSV file (cells that theval wrote against formulas back to their values:
    csv_cells)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            rows = [{k: csv_cells.from_cell(v) if isinstance(v, str) else v for k, v in r.items()} for r in reader]
            return list(reader.fieldnames or []), rows
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise UserError(f"cannot read {path}: {err}") from None


def _number(text):
    """float of a cell, NaN for an empty or nan cell, None when it is not a number."""
    text = (text or "").strip()
    if text == "" or text.lower() == "nan":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def _score_columns(rows: list[dict], names: list[str]) -> list[str]:
    """Columns whose every cell is a number (or empty), other than ranks, counts, notes and the
    bounds of the intervals (leaderboard.csv's "<name> CI low" / "<name> CI high")."""
    return [c for c in names
            if c.strip().lower() not in NOT_SCORES and not c.startswith(COUNT_PREFIX)
            and not c.endswith((CI_LOW, CI_HIGH))
            and all(_number(r[c]) is not None for r in rows)]


def _scores_from_csv(path: Path) -> ScoreTable:
    names, rows = _read_csv(path)
    model = next((c for c in names if c.strip().lower() == "model"), None)
    if model is None:
        raise UserError(f"{path}: no Model column (columns found: {', '.join(names) or 'none'}); expected "
                        f"a leaderboard CSV: Model, Type, {', '.join(METRICS)}, {FINAL} (other score "
                        "columns are correlated too)")
    gt = next((r[model] for r in rows if r[model].strip().lower() == "gt"
               or (r.get("Note") or "").strip() == "ground truth"), None)
    rows = [r for r in rows if r[model] != gt]
    named = {}
    for column in _score_columns(rows, [c for c in names if c != model]):
        named[_canonical(column)] = {r[model]: _number(r[column]) for r in rows}
    return _with_groups(ScoreTable(str(path), {}, gt), named)


def _canonical(column: str) -> str:
    for name in (*GROUPS, FINAL):
        if column.strip().lower() == name.lower():
            return name
    return canonical_metric(column) or column.strip()


def _with_groups(scores: ScoreTable, named: dict) -> ScoreTable:
    """Order the columns as the published table (others, 8 metrics, groups, Final); groups and
    Final computed from the 8 metrics when the file lacks them (as THEval defines them)."""
    if all(m in named for m in METRICS):
        models = list(named[METRICS[0]])
        per_model = {m: {k: named[k][m] for k in METRICS} for m in models}
        missing = [g for g in (*GROUPS, FINAL) if g not in named]
        groups = {m: group_scores(per_model[m]) for m in models}
        for g in GROUPS:
            named.setdefault(g, {m: groups[m][g] for m in models})
        named.setdefault(FINAL, {m: final_score(per_model[m]) for m in models})
        if missing:
            scores.notes.append(f"{', '.join(missing)}: not in {scores.source}, computed from the 8 "
                                "metrics (unweighted means)")
    canonical = [*METRICS, *GROUPS, FINAL]
    others = [c for c in named if c not in canonical]
    scores.columns = {c: named[c] for c in others + [c for c in canonical if c in named]}
    if not scores.columns:
        raise UserError(f"{scores.source}: no numeric score column")
    return scores


# ------------------------------------------------------------------------------ human preferences
def read_human(path) -> Human:
    """Per-model win rates (model,win_rate[,comparisons]) or pairwise judgements
    (model_a,model_b,preferred, other columns ignored), told apart by the header."""
    path = Path(path)
    header, rows = _read_csv(path)
    found = {c.strip().lower() for c in header}
    rows = [{k.strip().lower(): (v or "").strip() for k, v in r.items() if k is not None} for r in rows]
    if set(PAIRWISE_COLUMNS) <= found:
        return Human(str(path), "pairwise", _pairwise(path, rows))
    if set(WIN_RATE_COLUMNS) <= found:
        return Human(str(path), "win_rates", _given_rates(path, rows))
    raise UserError(f"{path}: columns {', '.join(header) or 'none'} are neither pairwise preferences "
                    f"({','.join(PAIRWISE_COLUMNS)}) nor win rates ({','.join(WIN_RATE_COLUMNS)}"
                    "[,comparisons])")


def _pairwise(path: Path, rows: list[dict]) -> dict:
    judgements = []
    for line, r in enumerate(rows, start=2):
        a, b, preferred = (r[c] for c in PAIRWISE_COLUMNS)
        if not a or not b or a == b:
            raise UserError(f"{path} line {line}: model_a and model_b must name two models ({a!r}, {b!r})")
        if preferred not in (a, b):
            raise UserError(f"{path} line {line}: preferred {preferred!r} is neither model_a {a!r} "
                            f"nor model_b {b!r}")
        judgements.append((a, b, preferred))
    if not judgements:
        raise UserError(f"{path}: no judgements")
    return win_rates(judgements)


def _given_rates(path: Path, rows: list[dict]) -> dict:
    rates = {}
    for line, r in enumerate(rows, start=2):
        rate, comparisons = _number(r["win_rate"]), r.get("comparisons") or ""
        if rate is None or not 0 <= rate <= 1:
            raise UserError(f"{path} line {line}: win_rate {r['win_rate']!r} is not a share between 0 and 1")
        if comparisons and not comparisons.isdigit():
            raise UserError(f"{path} line {line}: comparisons {comparisons!r} is not a count")
        if r["model"] in rates:
            raise UserError(f"{path} line {line}: {r['model']!r} is given twice")
        rates[r["model"]] = WinRate(rate, None, int(comparisons) if comparisons else None)
    if not rates:
        raise UserError(f"{path}: no win rates")
    return rates


# ------------------------------------------------------------------------------ published figures
def published_header() -> list[str]:
    return published_human_correlation()[0]


def published_correlations() -> dict:
    """metric -> the published row (its cells as printed)."""
    return published_human_correlation()[1]


# ------------------------------------------------------------------------------ outputs
def _cell(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.3f}"


def table_rows(correlations) -> list[list[str]]:
    """The published table's cells (rho, p, CI to 3 decimals, p as printed there) and n."""
    return [[c.metric, _cell(c.rho), format_p(c.p_value), _cell(c.ci[0]), _cell(c.ci[1]), str(c.n)]
            for c in correlations]


def _finite(value):
    return None if value is None or math.isnan(value) else float(value)


def alignment_document(scores: ScoreTable, human: Human, rates: dict, left_out: dict, correlations,
                       resamples: int, seed: int, level: float) -> dict:
    """alignment.json: the rows with numbers (NaN as null), the bootstrap's settings, the models
    used (rates: model -> WinRate, in the scores' spelling) and the ones left out."""
    return {
        "schema": "theval-alignment/1", "scores": scores.source, "human": human.source,
        "human_format": human.kind, "bootstrap": {"resamples": resamples, "seed": seed, "level": level,
                                                 "over": "models"},
        "models": list(rates), "left_out": left_out,
        "win_rates": {m: {"win_rate": r.rate, "wins": r.wins, "comparisons": r.comparisons}
                      for m, r in rates.items()},
        "rows": [{"metric": c.metric, "rho": _finite(c.rho), "p_value": _finite(c.p_value),
                  "ci": [_finite(c.ci[0]), _finite(c.ci[1])], "n": c.n, "dropped_resamples": c.dropped}
                 for c in correlations],
    }


def write_outputs(out_dir, correlations, document: dict) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / "alignment.csv", out / "alignment.json"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv_cells.Writer(f, lineterminator="\n")
        writer.writerow([*published_header(), "n"])
        writer.writerows(table_rows(correlations))
    json_path.write_text(json.dumps(document, indent=1, allow_nan=False), encoding="utf-8")
    return [csv_path, json_path]
