"""CITATION.cff is valid Citation File Format 1.2.0 (its required keys, a preferred citation of the
THEval paper) and names the version pyproject.toml builds; the README's BibTeX says the same."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_citation_file_names_the_paper_and_this_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert {"cff-version", "message", "title", "authors"} <= set(cff) and cff["cff-version"] == "1.2.0"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cff["version"] == version
    paper = cff["preferred-citation"]
    assert "THEval" in paper["title"] and paper["year"] == 2025 and "2511.04520" in paper["url"]
    assert all("family-names" in a and "given-names" in a for a in paper["authors"])
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"version\s*=\s*\{" + re.escape(version) + r"\}", readme)
    assert all(a["family-names"] in readme for a in paper["authors"])
