"""FVD `cd-fvd-videomae` against its own code: content-debiased FVD as released on PyPI (cd-fvd
0.1.1, installed with the tests), `fvd.cdfvd('videomae', ...)` run unmodified in this process on
the STAND-IN `vit_g_hybrid_pt_1200e_ssv2_ft.pth` (fake weights: the published file cannot be fetched
here), written at its real size: VideoMAE v2 ViT-g/14, 1,011,855,918 values, 3.8 GB. One clip, a GT
parity clip's first 16 frames: the network costs about a minute a clip on two cores, so it runs
twice, ours and cd-fvd's own loader and network on the same clip (the features must be equal). The
fake side's features are ours with a seeded perturbation: cd-fvd's FVD of its real statistics and
those fake features must equal our distance of the same two."""
import gc

import numpy as np
import pytest

from tests.support.parity_set import clip
from theval_mesh.backends import stand_in
from theval_mesh.backends.classic import fvd, networks, videomae
from theval_mesh.backends.media.decode import MediaReader

pytestmark = pytest.mark.slow
REAL = "astronaut_de_gt"


def _frames(name: str, count: int = 20) -> list:
    return [rgb for i, rgb in MediaReader(clip(name)).frames() if i < count]


def test_features_and_fvd_equal_cd_fvds_own_on_the_real_size_network(tmp_path):
    import torch
    from cdfvd import fvd as cd
    from cdfvd.utils.data_utils import preprocess

    store = tmp_path / "weights"
    marker = stand_in.write(store, 0, models=(), classic=["fvd-videomae"])
    assert set(marker["files"]) == {"vit_g_hybrid_pt_1200e_ssv2_ft.pth"}
    variant = fvd.VARIANTS["cd-fvd-videomae"]
    frames = _frames(REAL)
    net = variant.load(store)
    assert sum(p.numel() for p in net.parameters()) == 1_011_855_918
    real = variant.features(net, frames)
    fake = real + np.random.default_rng(0).normal(0, 0.1 * np.abs(real).std(), real.shape).astype(real.dtype)
    del net  # one 3.8 GB network at a time
    gc.collect()

    theirs = cd.cdfvd("videomae", n_real="full", n_fake="full", compute_feats=True, device="cpu",
                      ckpt_path=str(networks.weight_file("fvd-videomae", store)))

    # its folder loader's batch: data_utils.preprocess of the first 16 frames
    theirs.compute_real_stats([{"video": preprocess(torch.from_numpy(np.stack(frames[:16])),
                                                    fvd.CD_FVD_RESOLUTION)["video"][None]}])
    assert real.shape == theirs.real_stats.get_all().shape == (1, videomae.FEATURES)
    their_real = theirs.real_stats.get_all()
    assert np.abs(real - their_real).max() <= 1e-6 * np.abs(their_real).max()
    theirs.fake_stats.append(fake)  # FeatureStats' own API, as its feature function calls it
    # one clip a side: the covariances vanish and FVD is the squared distance of the two features
    expected = theirs.compute_fvd_from_stats()
    assert expected > 0
    assert variant.distance(fake, real) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(float(np.square(fake - real).sum()), rel=1e-4)
