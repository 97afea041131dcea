"""The FVD variants of `theval classic --fvd-variant` against their own code:
JunyaoHu/common_metrics_on_video_quality's `calculate_fvd` (methods styleganv and videogpt), run
unmodified on the parity clips and STAND-IN I3D files by
tests/data/parity/reference-env/run_fvd_variants_reference.py, values and features in
tests/data/parity/classic/fvd_variants_oracle.json; Wangt-CN/DisCo's FVD-3DInception by
run_disco_fvd_reference.py, in disco_fvd_oracle.json; cd-fvd's I3D FVD by its PyPI release, installed
with the tests and run in this process. StyleGAN-V's own: test_fid_fvd_parity.py."""
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
DISCO = json.loads((ROOT / "tests" / "data" / "parity" / "classic" / "disco_fvd_oracle.json").read_text())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("weights")
    marker = stand_in.write(path, ORACLE["stand_in"]["seed"], models=(), classic=["fvd-i3d", "fvd-i3d-videogpt"])
    assert {k: v["values_sha256"] for k, v in marker["files"].items()} == ORACLE["stand_in"]["values_sha256"]
    assert DISCO["stand_in"]["values_sha256"].items() <= ORACLE["stand_in"]["values_sha256"].items()
    return path


def frames(name: str, count: int = 40):
    """More frames than the variant takes: it must stop at its 16."""
    reader = MediaReader(CLIPS / name)
    try:
        yield from (f for _, f in itertools.islice(reader.frames(), count))
    finally:
        reader.close()


def features(variant: str, net, count: int = 40, sets: dict = ORACLE["sets"]) -> dict:
    """{side: (4, 400) features}, one video per call as classic computes them (ORACLE's sides:
    videos1 (GT), videos2 (noisy))."""
    return {side: np.concatenate([fvd.VARIANTS[variant].features(net, frames(n, count)) for n in names])
            for side, names in sets.items()}


@pytest.mark.parametrize("variant", ["common-metrics-styleganv", "common-metrics-videogpt"])
def test_each_common_metrics_method_gives_its_own_codes_features_and_fvd(store, variant):
    """Each video's first 16 frames as one clip, the shorter side to 224 and the centre crop, [-1, 1]
    (videogpt: requantised to uint8 first, its own I3D file): the toolkit's features to 1e-5 of the
    largest (measured 5e-7), and its FVD from features computed one video per detector call, as
    classic computes them, to 1e-4 relative for the styleganv method. Its default call puts the 4
    videos in one detector call: its features differ from ours by rounding, which moves the
    styleganv method's FVD by 8e-6 relative and the videogpt method's by 19 %: TF-GAN's float32 SVD
    roots the rounding noise of a rank-3 covariance's zero singular values. The CPU's kernels round
    too: on the AVX-512 machine the oracle was made on, ours gave its values to the same float64
    digits; without AVX-512, features within 1e-6 of the largest gave the styleganv method's FVD
    1.1e-5 relative away and the videogpt method's 34 % (0.0393 against 0.0597). So the videogpt
    method's FVD of features computed here is not compared with the oracle's; our distance on its
    own features gives its value, for both methods."""
    expected = ORACLE[variant]
    v = fvd.VARIANTS[variant]
    ours = features(variant, v.load(store))
    theirs = {side: np.array(f) for side, f in expected["features"].items()}
    for side, feats in ours.items():
        assert feats.shape == theirs[side].shape == (4, fvd.FEATURES)
        assert np.abs(feats - theirs[side]).max() <= 1e-5 * np.abs(theirs[side]).max()
    # classic's (generated, GT) order; the toolkit's README passes the originals first
    if variant.endswith("styleganv"):
        assert v.distance(ours["videos2"], ours["videos1"]) == pytest.approx(expected["fvd_one_video_per_call"], rel=1e-4)
    assert v.distance(theirs["videos2"], theirs["videos1"]) == pytest.approx(expected["fvd"], rel=1e-6)
    moved = abs(expected["fvd_one_video_per_call"] / expected["fvd"] - 1)
    assert moved > 0.1 if variant.endswith("videogpt") else moved < 1e-4


def test_disco_gives_its_own_codes_features_and_fvd(store):
    """DisCo's FVD-3DInception on the first 24 frames of 4 speakers (its dataset read losslessly cut
    copies through ffmpeg; ours decodes the originals): each whole video one clip, resized to 224 by
    PIL bicubic in float, its InceptionI3d (eps 1e-3, a 1x7x7 final pool) on the same
    i3d_pretrained_400.pt as the videogpt method. Features and FVD equal to the last digit on the
    AVX-512 machine the oracle was made on; without AVX-512 the features differ by rounding (within
    1e-6 of the largest) and the FVD by 6e-6 relative, as much as the matrix square root of the
    same features moves between the two CPUs: held to 1e-4. The FVD from float32 means, as its
    fid_from_feats on float32 features."""
    v = fvd.VARIANTS["disco"]
    ours = features("disco", v.load(store), 24, DISCO["sets"])
    theirs = {side: np.array(f) for side, f in DISCO["disco"]["features"].items()}
    for side, feats in ours.items():
        assert feats.shape == theirs[side].shape == (4, fvd.FEATURES)
        assert np.abs(feats - theirs[side]).max() <= 1e-6 * np.abs(theirs[side]).max()
    assert v.distance(ours["gen"], ours["gt"]) == pytest.approx(DISCO["disco"]["fvd"], rel=1e-4)
    # its network differs from the videogpt method's copy on the same file: eps and the last pool
    videogpt = fvd.VARIANTS["common-metrics-videogpt"].load(store)
    clip = np.stack(list(frames("tom_it_gt.mp4", 16)))
    assert np.abs(v.features(videogpt, clip) - v.features(v.load(store), clip)).max() > 1e-3
    assert v.features(v.load(store), clip[:1]).shape == (1, fvd.FEATURES)  # any length has a time step


def test_cd_fvd_gives_its_own_codes_features_and_fvd(store):
    """cd-fvd 0.1.1 (installed with the tests) run unmodified in this process: fvd.cdfvd('i3d',
    n_real='full', n_fake='full') on the store's i3d_pretrained_400.pt, each side a batch of its
    data_utils.preprocess(clip, 256) as its video_folder loader yields them, through its
    compute_real_stats, compute_fake_stats and compute_fvd_from_stats. The clips are the videos'
    first 16 frames as we decode them: its loader reads files through torchvision's VideoClips,
    which torchvision 0.29 can no longer decode, and it draws the clip's start at random (for a
    16-frame video, the first). Its features to 1e-6 of the largest, its FVD from them to 1e-9
    relative (measured 2e-13); a wide clip (cropped to its centre) too."""
    import torch
    from cdfvd import fvd as cd
    from cdfvd.utils.data_utils import preprocess
    from einops import rearrange

    from theval_mesh.backends.classic import networks

    v = fvd.VARIANTS["cd-fvd-i3d"]
    net = v.load(store)
    ours = features("cd-fvd-i3d", net)
    theirs = cd.cdfvd("i3d", n_real="full", n_fake="full", compute_feats=True, device="cpu",
                      ckpt_path=str(networks.weight_file("fvd-i3d-videogpt", store)))

    def loader(names):
        clips = [torch.from_numpy(np.stack(list(frames(n, 16)))) for n in names]
        return [{"video": torch.stack([preprocess(c, fvd.CD_FVD_RESOLUTION)["video"] for c in clips])}]

    theirs.compute_real_stats(loader(ORACLE["sets"]["videos1"]))
    theirs.compute_fake_stats(loader(ORACLE["sets"]["videos2"]))
    for side, stats in (("videos1", theirs.real_stats), ("videos2", theirs.fake_stats)):
        assert ours[side].shape == (4, fvd.FEATURES)
        assert np.abs(ours[side] - stats.get_all()).max() <= 1e-6 * np.abs(stats.get_all()).max()
    # classic computes one video per detector call, cd-fvd its batch of 4: the features differ by
    # rounding (5e-7 of the largest), which moves this tiny FVD of a rank-3 covariance by 7e-6
    expected = theirs.compute_fvd_from_stats()
    assert v.distance(theirs.fake_stats.get_all(), theirs.real_stats.get_all()) == pytest.approx(expected, rel=1e-9)
    assert v.distance(ours["videos2"], ours["videos1"]) == pytest.approx(expected, rel=1e-4)
    wide = np.random.default_rng(0).integers(0, 256, (16, 64, 160, 3), dtype=np.uint8)
    batch = preprocess(torch.from_numpy(wide), fvd.CD_FVD_RESOLUTION)["video"][None]
    with torch.no_grad():
        # compute_real_stats' own conversion, then get_i3d_logits' preprocessing and call
        expected = theirs.model(cd.preprocess_i3d(rearrange(batch * 255, "b c t h w -> b t h w c").byte().numpy())).numpy()
    assert np.abs(v.features(net, wide) - expected).max() <= 1e-6 * np.abs(expected).max()


def test_the_styleganv_methods_differ_by_their_covariance_on_square_frames_and_by_their_resize_on_wide_ones(store):
    """StyleGAN-V's call on the same 16 frames: on square frames its trilinear resize is the same
    bilinear one and x / 255 * 2 - 1 the same scaling, so only the covariance differs (divided by
    N = 4, not N - 1 = 3: the trace term scales by 3/4, the means' not); a wide frame is squashed by
    one and cropped by the other."""
    detector = fvd.load_detector(store)
    ours, stylegan = features("common-metrics-styleganv", detector), features("stylegan-v", detector, 16)
    assert np.abs(stylegan["videos1"] - ours["videos1"]).max() <= 1e-5 * np.abs(ours["videos1"]).max()
    unbiased = fvd.VARIANTS["common-metrics-styleganv"].distance(ours["videos2"], ours["videos1"])
    means = float(np.square(ours["videos1"].mean(0) - ours["videos2"].mean(0)).sum())
    assert fvd.VARIANTS["stylegan-v"].distance(stylegan["videos2"], stylegan["videos1"]) == pytest.approx(
        means + (unbiased - means) * 3 / 4, rel=1e-4)
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
    variant's (one clip a video), said in its provenance; the others sit beside it, from the same
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
    # cd-fvd-videomae's 3.8 GB network is not in this store (test_fvd_videomae.py has it): named, skipped
    assert ("m", "FVD", "cd-fvd-videomae") not in run.variants
    assert any(s.startswith("FVD variant cd-fvd-videomae: ") and "vit_g_hybrid_pt_1200e_ssv2_ft.pth" in s
               for s in run.skipped)
    values = {v: run.variants[("m", "FVD", v)] for v in fvd.VARIANTS if v != "cd-fvd-videomae"}
    assert values["common-metrics-styleganv"] == run.summary[0]["FVD"] > 0
    assert values["stylegan-v"] > 0 and values["stylegan-v"] != pytest.approx(values["common-metrics-styleganv"], rel=1e-3)
    assert values["common-metrics-videogpt"] > 0 and values["disco"] > 0 and values["cd-fvd-i3d"] > 0
    assert "FVD (stylegan-v)" in run.provenance and "i3d_pretrained_400.pt" in run.provenance["FVD (common-metrics-videogpt)"]
    table = (tmp_path / "out" / "classic_variants.md").read_text()
    assert "| common-metrics-styleganv (default) | cd-fvd-i3d | common-metrics-videogpt | disco | stylegan-v |" in table
    with pytest.raises(UsageRefused, match="--fvd-variant 'fvd': one of stylegan-v, common-metrics-styleganv, "
                                           "common-metrics-videogpt, disco, cd-fvd-i3d, cd-fvd-videomae"):
        theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, store=store, fvd_variant="fvd")
