"""The order `./dev test` hands files to its workers: the longest first, from tests/durations.txt."""
from pathlib import Path

from scripts.test_durations import file_seconds
from tests.conftest import file_seconds as table

ROOT = Path(__file__).resolve().parents[2]


def test_a_files_seconds_sum_every_phase_of_its_tests():
    lines = ["    2.00      1.00 setup    passed  tests/unit/test_a.py::test_x[1]",
             "    3.50      0.20 call     passed  tests/unit/test_a.py::test_x[2]",
             "    1.25      9.00 teardown passed  tests/e2e/test_b.py::test_y",
             "garbage"]
    assert file_seconds(lines) == {"tests/unit/test_a.py": 5.5, "tests/e2e/test_b.py": 1.25}


def test_the_table_names_existing_files_longest_first():
    seconds = table()
    assert len(seconds) > 20
    missing = [path for path in seconds if not (ROOT / path).is_file()]
    assert missing == [], f"tests/durations.txt names files that are gone: regenerate it ({missing})"
    assert list(seconds.values()) == sorted(seconds.values(), reverse=True)
