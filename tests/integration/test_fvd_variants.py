"""The FVD variants of `theval classic --fvd-variant` against their own code:
JunyaoHu/common_metrics_on_video_quality's `calculate_fvd`, run unmodified on the parity clips and the
STAND-IN I3D by tests/data/parity/reference-env/run_fvd_variants_reference.py, values and features in
tests/data/parity/classic/fvd_variants_oracle.json. StyleGAN-V's own: test_fid_fvd_parity.py."""
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from tests.support.model_parity_set import cut
from theval_mesh.backends import stand_in
from theval_mesh.backends.classic import fvd
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.errors import UsageRefused

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIPS = ROOT / "tests" / "data" / "parity" / "clips"
ORACLE = json.loads((ROOT / "tests" / "data" / "parity" / "classic" / "fvd_variants_oracle.json").read_text())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("weights")
    marker = stand_in.write(path, ORACLE["stand_in"]["seed"], models=(), classic=["fvd-i3d"])
    assert {k: v["values_sha256"] for k, v in marker["files"].items()} == ORACLE["stand_in"]["values_sha256"]
    return path


def frames(name: str, count: int = 40):
    """More frames than the variant takes: it must stop at its 16."""
    reader = MediaReader(CLIPS / name)
    try:
        yield from (f for _, f in itertools.islice(reader.frames(), count))
    finally:
        reader.close()


def test_common_metrics_styleganv_gives_its_own_codes_features_and_fvd(store):
    """Each video's first 16 frames as one clip, the shorter side to 224 and the centre crop, [-1, 1],
    the detector's own rescale and resize off: the toolkit's features to 1e-5 of the largest
    (measured 5e-7: it runs the 4 videos as one batch) and its FVD to 1e-4 relative (8e-6: the square
    root of a product of rank-3 covariances amplifies the features' rounding)."""
    variant, detector = fvd.VARIANTS["common-metrics-styleganv"], fvd.load_detector(store)
    expected = ORACLE["common-metrics-styleganv"]
    ours = {side: np.concatenate([variant.features(detector, frames(n)) for n in names])
            for side, names in ORACLE["sets"].items()}
    for side, feats in ours.items():
        theirs = np.array(expected["features"][side])
        assert feats.shape == theirs.shape == (4, fvd.FEATURES)
        assert np.abs(feats - theirs).max() <= 1e-5 * np.abs(theirs).max()
    # classic's (generated, GT) order; the toolkit's README passes the originals first
    assert variant.distance(ours["videos2"], ours["videos1"]) == pytest.approx(expected["fvd"], rel=1e-4)
    # StyleGAN-V's call on the same 16 frames: on square frames its trilinear resize is the same
    # bilinear one and x / 255 * 2 - 1 the same scaling, so only the covariance (biased) differs...
    stylegan = {side: np.concatenate([fvd.VARIANTS["stylegan-v"].features(detector, frames(n, 16)) for n in names])
                for side, names in ORACLE["sets"].items()}
    assert np.abs(stylegan["videos1"] - ours["videos1"]).max() <= 1e-5 * np.abs(ours["videos1"]).max()
    # (the covariances divided by N = 4, not N - 1 = 3: the trace term scales by 3/4, the means' not)
    means = float(np.square(ours["videos1"].mean(0) - ours["videos2"].mean(0)).sum())
    assert fvd.VARIANTS["stylegan-v"].distance(stylegan["videos2"], stylegan["videos1"]) == pytest.approx(
        means + (expected["fvd"] - means) * 3 / 4, rel=1e-4)
    # ...while a wide frame is squashed by one and cropped by the other
    wide = np.random.default_rng(0).integers(0, 256, (16, 64, 160, 3), dtype=np.uint8)
    a, b = (fvd.VARIANTS[v].features(detector, wide) for v in ("stylegan-v", "common-metrics-styleganv"))
    assert np.abs(a - b).max() > 1e-3 * np.abs(b).max()


def test_the_shorter_side_is_scaled_and_the_centre_kept():
    """A 100 x 300 frame: the height to 224, the width to ceil(300 * 2.24) = 672, then the middle 224
    columns. A frame whose thirds are black, white, black keeps only white."""
    import torch

    frame = torch.zeros(3, 1, 100, 300)
    frame[..., 100:200] = 1.0
    out = fvd.shorter_side_crop(frame)
    assert out.shape == (3, 1, 224, 224)
    assert float(out[..., :, 10:214].min()) == pytest.approx(1.0)
    square = torch.rand(3, 2, 50, 50)
    assert fvd.shorter_side_crop(square, 50).equal(square)


def test_the_command_names_the_variant_and_computes_every_other(store, tmp_path):
    """`classic(fvd_variant="common-metrics-styleganv", all_variants=True)`: the FVD column is that
    variant's (one clip a video), said in its provenance; StyleGAN-V's sits beside it, from the same
    decoded frames; an unknown name is refused, naming the choices."""
    import theval_mesh

    for side in ("gt", "m"):
        (tmp_path / side).mkdir()
    for speaker in ("astronaut_de", "tom_it"):
        cut(f"{speaker}_gt", 32, tmp_path / "gt" / f"{speaker}.mp4")
        cut(f"{speaker}_noisy", 32, tmp_path / "m" / f"{speaker}.mp4")
    run = theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, tmp_path / "out", store=store,
                              fvd_variant="common-metrics-styleganv", all_variants=True)
    assert "FVD variant common-metrics-styleganv (JunyaoHu/common_metrics_on_video_quality" in run.provenance["FVD"]
    assert run.samples[("m", "FVD")][:2] == (2, 2)  # one clip a video
    values = {v: run.variants[("m", "FVD", v)] for v in fvd.VARIANTS}
    assert values["common-metrics-styleganv"] == run.summary[0]["FVD"] > 0
    assert values["stylegan-v"] > 0 and values["stylegan-v"] != pytest.approx(values["common-metrics-styleganv"], rel=1e-3)
    assert "FVD (stylegan-v)" in run.provenance
    table = (tmp_path / "out" / "classic_variants.md").read_text()
    assert "| common-metrics-styleganv (default) | stylegan-v" in table
    with pytest.raises(UsageRefused, match="--fvd-variant 'fvd': one of stylegan-v, common-metrics-styleganv"):
        theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, store=store, fvd_variant="fvd")
