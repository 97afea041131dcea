"""`theval align`: how well each metric agrees with human preferences (paper Table 2)."""
import json
import sys
from pathlib import Path

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.scoring.alignment import LEVEL, MIN_MODELS, RESAMPLES, SEED, align
from theval_mesh.studies.alignment_files import (
    Human,
    ScoreTable,
    alignment_document,
    published_correlations,
    read_human,
    read_scores,
    table_rows,
    write_outputs,
)

HEADER = ["Metric", "Spearman rho", "p-value", "CI95 low", "CI95 high", "n"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "align", help="Spearman correlation of each metric with human win rates (paper Table 2)",
        description="For every metric, group and the Final score: Spearman's rho between the models' "
                    "scores and their human win rates, its p-value and a 95 % bootstrap CI over models "
                    f"({RESAMPLES} resamples, seed {SEED}). Writes alignment.csv and alignment.json.")
    p.add_argument("--scores", required=True, metavar="RESULTS",
                   help="a results directory or its results.json (theval evaluate), or a leaderboard CSV "
                        "(Model, Type, the 8 metrics, Final score; other numeric columns correlated too)")
    p.add_argument("--human", required=True, metavar="PREFS.csv",
                   help="pairwise judgements (model_a,model_b,preferred; what `theval study export` "
                        "writes) or per-model win rates (model,win_rate[,comparisons])")
    p.add_argument("--out", metavar="DIR", help="where to write the files (default: beside the scores)")
    p.add_argument("--json", action="store_true", help="print alignment.json instead of the table")
    p.add_argument("--published", action="store_true",
                   help="show the published figure beside ours where the paper has the metric")
    p.set_defaults(func=run)


def _fold(names, source: str) -> dict:
    """Model names matched case-insensitively (a study's folder names against a leaderboard's)."""
    folded = {}
    for name in names:
        key = name.casefold()
        if key in folded:
            raise UserError(f"{source}: {folded[key]!r} and {name!r} differ only in case")
        folded[key] = name
    return folded


def shared_models(scores: ScoreTable, human: Human) -> tuple[list, dict, dict]:
    """The models in both files (scores' order and spelling), the ones left out of each, and the
    shared models' win rates under the scores' spelling."""
    in_scores = _fold(next(iter(scores.columns.values())), scores.source)
    in_human = _fold(human.rates, human.source)
    gt = (scores.gt or "GT").casefold()
    used = [name for key, name in in_scores.items() if key in in_human]
    left_out = {"not_in_human": [n for k, n in in_scores.items() if k not in in_human],
                "not_in_scores": [n for k, n in in_human.items() if k not in in_scores and k != gt],
                "gt_in_human": [n for k, n in in_human.items() if k == gt]}
    if len(used) < MIN_MODELS:
        raise UserError(f"only {len(used)} model(s) are in both {scores.source} and {human.source} "
                        f"({', '.join(used) or 'none'}): a rank correlation needs at least {MIN_MODELS}")
    return used, left_out, {name: human.rates[in_human[name.casefold()]] for name in used}


def _notes(scores: ScoreTable, human: Human, left_out: dict) -> list[str]:
    notes = list(scores.notes)
    if left_out["not_in_human"]:
        notes.append(f"not in {human.source}, left out: {', '.join(left_out['not_in_human'])}")
    if left_out["not_in_scores"]:
        notes.append(f"not in {scores.source}, left out: {', '.join(left_out['not_in_scores'])}")
    if left_out["gt_in_human"]:
        notes.append(f"{left_out['gt_in_human'][0]} is the ground truth, not a model: left out")
    return notes


def format_table(correlations, published: dict | None) -> str:
    header = HEADER + (["Published rho", "Published p", "Published CI95"] if published is not None else [])
    lines = [header]
    for c, cells in zip(correlations, table_rows(correlations)):
        if published is not None:
            row = published.get(c.metric)
            cells += ([row["Spearman rho"], row["p-value"], f"[{row['CI95 low']}, {row['CI95 high']}]"]
                      if row else ["-", "-", "-"])
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(line, widths))) for line in lines)


def run(args) -> int:
    scores, human = read_scores(args.scores), read_human(args.human)
    used, left_out, rates = shared_models(scores, human)
    columns = {metric: {m: values[m] for m in used} for metric, values in scores.columns.items()}
    correlations = align(columns, {m: rates[m].rate for m in used})
    document = alignment_document(scores, human, rates, left_out, correlations, RESAMPLES, SEED, LEVEL)
    published = published_correlations() if args.published else None
    if published is not None:
        document["published"] = {c.metric: published[c.metric] for c in correlations if c.metric in published}
    out = Path(args.out) if args.out else _beside(Path(args.scores))
    paths = write_outputs(out, correlations, document)
    for note in _notes(scores, human, left_out):
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(document, indent=1, allow_nan=False))
        return 0
    print(format_table(correlations, published))
    print(f"\n{LEVEL:.0%} CI: bootstrap over the {len(used)} models, {RESAMPLES} resamples, seed {SEED}")
    for c in correlations:
        if c.dropped:
            print(f"{c.metric}: {c.dropped} resamples dropped (a side constant: no rank correlation)")
    for path in paths:
        print(f"wrote {path}")
    return 0


def _beside(scores: Path) -> Path:
    """The results directory of the scores."""
    return scores if scores.is_dir() else scores.parent
