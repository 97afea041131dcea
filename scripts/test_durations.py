"""Which test files take longest: the order `./dev test` hands them to its workers.

    THEVAL_TEST_TIMES=times.txt ./dev test
    python scripts/test_durations.py times.txt > tests/durations.txt

sums each file's wall seconds (every phase of every test) from a THEVAL_TEST_TIMES file and writes
one "seconds path" line per file, longest first. tests/conftest.py runs the longest files first, so
that the two workers finish together instead of one running a long file alone at the end; a file
not in the table runs after those that are.
"""
import sys
from collections import defaultdict


def file_seconds(lines) -> dict[str, float]:
    """path -> summed wall seconds, from THEVAL_TEST_TIMES lines ("wall cpu phase outcome nodeid")."""
    out = defaultdict(float)
    for line in lines:
        fields = line.split()
        if len(fields) >= 5:
            out[fields[4].split("::")[0]] += float(fields[0])
    return dict(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        seconds = file_seconds(f)
    for path, s in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{s:.0f} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
