"""docs/adding-a-metric.md, followed in a copy of the repository: its toy metric (Jaw motion) is
declared, computed and tested as the page's steps say, the checks it names pass but the one it says
fails, and `theval score` scores it as the page says."""
import re

import pytest

from tests.support.page_support import ROOT, add_file, blocks, copy_repository, insert, run

PAGE = ROOT / "docs" / "adding-a-metric.md"
REGISTRY = "services/theval_mesh/pure/metrics/registry.py"
COMPUTE = "services/theval_mesh/core/compute.py"
TABLE = "from theval_mesh.pure.metrics.registry import markdown_table; print(markdown_table(), end='')"


@pytest.mark.slow
def test_following_the_page_adds_a_metric_to_every_table(tmp_path):
    repo = copy_repository(tmp_path, "services", "tests", "scripts", "docs", "pyproject.toml")
    steps = blocks(PAGE)
    old_table = run(repo, "-c", TABLE).stdout
    # 1. the function; 4. its test
    for path in ("services/theval_mesh/pure/metrics/jaw_motion.py", "tests/unit/test_jaw_motion.py"):
        add_file(repo, path, *steps[path])
    # 2. the registry: the entry above REGISTRY, then JAW_MOTION at its end
    registry = repo / REGISTRY
    insert(registry, *steps[REGISTRY], before="REGISTRY = (")
    registry.write_text(re.sub(r"(REGISTRY = \([^)]*)\)", r"\1, JAW_MOTION)", registry.read_text(), count=1))
    # 3. its arguments: the function above _ARGUMENTS, then its entry there
    compute = repo / COMPUTE
    insert(compute, *steps[COMPUTE], before="_ARGUMENTS = {")
    compute.write_text(compute.read_text().replace("_ARGUMENTS = {", "_ARGUMENTS = {JAW_MOTION.key: _jaw_motion, ", 1))
    # The Metrics page's table, pasted
    new_table = run(repo, "-c", TABLE).stdout
    assert "| 9 | Jaw motion | `jaw_motion` | Naturalness | closer to GT | jaw | `jaw_motion.jaw_motion` |" in new_table
    page = repo / "docs" / "metrics.md"
    page.write_text(page.read_text().replace(old_table, new_table))

    # The checks the page names: all pass but the published data's, as it says.
    done = run(repo, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_jaw_motion.py",
               "tests/unit/test_registry.py", "tests/unit/test_layers.py", check=False)
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.M)
    assert failed == ["tests/unit/test_registry.py::test_the_registry_is_in_the_reference_csv_column_order"], \
        done.stdout[-4000:]
    assert re.search(r"\b2 passed", run(repo, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                        "tests/unit/test_jaw_motion.py").stdout)

    # The Final score of the page's example: the talker's jaw motion is half the GT's.
    (repo / "raw.csv").write_text(*steps["raw.csv"])
    scored = run(repo, "-m", "theval_mesh", "score", "--metrics", "raw.csv").stdout
    header, talker = (next(line.split() for line in scored.splitlines() if line.split()[:2] == start)
                      for start in (["Rank", "Model"], ["1", "talker"]))
    row = dict(zip(header, talker))
    assert (row["Jaw"], row["Nat"], row["FINAL"]) == ("0.5000", "0.8750", "0.9444"), scored
    weighed = run(repo, "-m", "theval_mesh", "score", "--metrics", "raw.csv", "--weights", "Jaw motion=0").stdout
    assert re.search(r"^\s+1\s+talker\s.*\s0\.5000\s.*\s1\.0000\s+-$", weighed, re.M), weighed
