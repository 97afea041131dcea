"""Are two evaluation runs' results the same? For refactors: run the demo (or `theval evaluate`)
before and after, then

    python scripts/compare_runs.py BEFORE_DIR AFTER_DIR

compares their results.csv and leaderboard.csv cell by cell: metric values exactly (their repr), NaN
reasons, statuses, frame counts and provenance. Wall-clock seconds are ignored, and each run's own
folder is taken out of the paths. Exit 0 when identical, 1 with the differences otherwise.
"""
import csv
import sys
from pathlib import Path

FILES = ("results.csv", "leaderboard.csv")
IGNORED = {"seconds"}  # wall-clock time: differs between any two runs


def _find(root: Path, name: str) -> Path:
    found = sorted(root.rglob(name))
    if not found:
        raise SystemExit(f"error: no {name} under {root}")
    return found[0]


def _rows(path: Path, root: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: v.replace(str(root.resolve()), "<run>") for k, v in row.items() if k not in IGNORED}
                for row in csv.DictReader(f)]


def differences(before: Path, after: Path) -> list[str]:
    out = []
    for name in FILES:
        a, b = _rows(_find(before, name), before), _rows(_find(after, name), after)
        if len(a) != len(b):
            out.append(f"{name}: {len(a)} rows before, {len(b)} after")
        for i, (ra, rb) in enumerate(zip(a, b)):
            for col in sorted(set(ra) | set(rb)):
                if ra.get(col) != rb.get(col):
                    out.append(f"{name} row {i + 1} ({ra.get('model', '')} {ra.get('video', '')}) {col}: "
                               f"{ra.get(col)!r} -> {rb.get(col)!r}")
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = map(Path, args)
    diff = differences(before, after)
    for line in diff:
        print(line)
    rows = sum(len(_rows(_find(after, n), after)) for n in FILES)
    print(f"{'identical' if not diff else f'{len(diff)} differences'}: {', '.join(FILES)} ({rows} rows)")
    return 0 if not diff else 1


if __name__ == "__main__":
    sys.exit(main())
