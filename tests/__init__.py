"""The test suites (unit/, integration/, e2e/) and the helpers they share (tests.support), imported
from the repository's root as the package `tests`: pytest puts the root on sys.path (pyproject.toml,
[tool.pytest.ini_options] pythonpath), and so does bench/common.py for the benchmarks."""
