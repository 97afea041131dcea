"""FID and FVD against the reference implementations' own code (pytorch-fid 0.3.0, StyleGAN-V's FVD),
run unmodified on the same frames and the same stand-in weights by
tests/data/parity/reference-env/run_fid_fvd_reference.py, values in tests/data/parity/classic/."""
import itertools
import json
from pathlib import Path

import pytest

from theval_mesh.backends import stand_in
from theval_mesh.backends.classic import fid, fvd
from theval_mesh.backends.media.decode import MediaReader

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIPS = ROOT / "tests" / "data" / "parity" / "clips"
ORACLE = json.loads((ROOT / "tests" / "data" / "parity" / "classic" / "fid_fvd_oracle.json").read_text())
FRAMES = 32  # the runner's frames 0..31 of each clip


def frames(name):
    reader = MediaReader(CLIPS / name)
    try:
        yield from itertools.islice(reader.frames(), FRAMES)
    finally:
        reader.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("weights")
    marker = stand_in.write(path, ORACLE["stand_in"]["seed"], models=(), classic=["fid-inception", "fvd-i3d"])
    # the very weights the reference ran on
    assert {k: v["values_sha256"] for k, v in marker["files"].items()} == ORACLE["stand_in"]["values_sha256"]
    return path


def test_fid_matches_pytorch_fid(store):
    net = fid.load_network(store)
    sides = {side: fid.inception_features((f for name in names for f in frames(name)), net=net)
             for side, names in ORACLE["sets"].items()}
    assert {side: f.n for side, f in sides.items()} == ORACLE["fid_frames"]
    assert fid.fid(sides["A"], sides["B"]) == pytest.approx(ORACLE["fid"], rel=5e-3)


def test_fvd_matches_stylegan_v(store):
    detector = fvd.load_detector(store)
    sides = {side: fvd.i3d_features([frames(name) for name in names], detector=detector)
             for side, names in ORACLE["sets"].items()}
    assert {side: f.clips for side, f in sides.items()} == ORACLE["fvd_clips"]
    assert {side: f.videos for side, f in sides.items()} == ORACLE["fvd_videos"]
    assert fvd.fvd(sides["A"], sides["B"]) == pytest.approx(ORACLE["fvd"], rel=5e-3)
