"""The user documentation (docs/, mkdocs.yml): it builds with `mkdocs build --strict`, its gRPC page
is what docs/gen_grpc_api.py makes of the current .proto files, and nothing in the repository
cites the internal briefs it replaced."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The internal briefs that docs/ replaced, spelled in pieces so that this file does not cite them.
BRIEFS = tuple(f"{name}.md" for name in ("METRICS", "DESIGN"))


def test_the_site_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed in this environment, so the documentation cannot be checked: "
                    "install it with `pip install -c constraints.txt mkdocs` (it is in the `test` extra, "
                    "which `./dev setup` installs)")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                          str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}"
    assert (tmp_path / "site" / "metrics" / "index.html").is_file()


def test_the_grpc_page_is_generated_from_the_protos():
    spec = importlib.util.spec_from_file_location("gen_grpc_api", ROOT / "docs" / "gen_grpc_api.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    page = (ROOT / "docs" / "grpc-api.md").read_text(encoding="utf-8")
    assert page == gen.render(), "docs/grpc-api.md is stale: run python docs/gen_grpc_api.py"
    for proto in (ROOT / "protos" / "theval" / "v1").glob("*.proto"):
        for service in gen.parse(proto).blocks:
            if service.kind == "service":
                assert f"### {service.name}" in page and all(f"`{r.name}`" in page for r in service.rpcs)


def test_no_file_cites_the_internal_briefs():
    # The files of the repository (git's list), not build leftovers such as an old egg-info.
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    citing = []
    for name in filter(None, listed.decode().split("\0")):
        try:
            data = (ROOT / name).read_bytes()
        except OSError:  # deleted in the work tree
            continue
        citing += [f"{name}: {brief}" for brief in BRIEFS if brief.encode() in data]
    assert not citing, ("these files cite briefs that are not in the repository; cite the page of docs/ "
                        "instead:\n" + "\n".join(citing))
