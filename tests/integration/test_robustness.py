"""`theval robustness` on real talking-head clips of the parity set, cut to 110 frames: the
re-encodes are made, scored against the originals with the real landmark, head-pose and audio
models (proxy quality), and the noise floors, the LSE change (STAND-IN SyncNet weights: fake, the
real ones cannot be fetched here), the files and the notes for an evaluation's leaderboard come out.
A re-run resumes instead of scoring again."""
import json
import math

import pytest

from tests.support.model_parity_set import cut
from tests.support.results_schema import validate_results
from theval_mesh.backends import stand_in
from theval_mesh.commands.cli import main as cli
from theval_mesh.pure.scoring.names import METRICS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("robustness")
    stand_in.write(root / "store", 0, models=(), classic=["syncnet"])
    (root / "gt").mkdir()
    for name in ("astronaut_de_gt", "tom_it_gt"):
        cut(name, 110, root / "gt" / f"{name}.mp4")
    args = ["robustness", "--gt", str(root / "gt"), "--out", str(root / "out"), "--inline", "--quiet",
            "--weights-store", str(root / "store"), "--kind", "video-codec", "--kind", "resolution"]
    assert cli(args) == 0
    return root, args


def test_floors_changes_and_files(run, capsys):
    root, _ = run
    out = root / "out"
    assert {p.name for p in out.iterdir()} >= {"robustness.csv", "robustness.md", "robustness.json", "robustness.png",
                                              "variants", "evaluation"}
    doc = json.loads((out / "robustness.json").read_text())
    kinds = {c["kind"] for c in doc["changes"]}
    assert kinds == {"video-codec", "resolution"}
    for c in doc["changes"]:
        assert c["change"] <= 1e-12  # a normalised score (1 - |x - GT| / |GT|) cannot pass 1
        if c["low"] is not None:
            assert c["low"] <= c["change"] + 1e-12 and c["change"] <= c["high"] + 1e-12
    for metric in [*METRICS, "Final score"]:
        floor = doc["floors"][metric]
        assert floor["floor"] >= 0 and floor["kind"] in kinds
    assert {r["kind"] for r in doc["lse"]} == kinds and all(r["clips"] == 2 for r in doc["lse"])
    assert any("stand-in:0" in n for n in doc["notes"]) and any("PROXY" in n for n in doc["notes"])
    md = (out / "robustness.md").read_text()
    assert "| Final score |" in md and "(PROXY)" in md and "LSE-C change" in md


def test_notes_for_a_leaderboard_and_a_resumed_rerun(run, capsys):
    root, args = run
    evaluation = root / "out" / "evaluation"   # an evaluation's folder: the re-encodes ranked against the GT
    assert cli([*args, "--results", str(evaluation), "--no-lse"]) == 0
    printed = capsys.readouterr()
    assert "resuming" in printed.err  # nothing scored again
    doc = json.loads((evaluation / "results.json").read_text())
    validate_results(doc)
    floor = doc["robustness"]["floors"]["Final score"]["floor"]
    finals = sorted((e["final"]["value"] for e in doc["leaderboard"] if not e["is_gt"]), reverse=True)
    gap = finals[0] - finals[1]
    assert bool(doc["robustness"]["below_floor"]) == (gap < floor) and not math.isnan(floor)
