"""The FID variants of `theval classic --fid-variant` against their own code: clean-fid 0.1.35 (the
PyPI release, GaParmar/clean-fid c8ffa42), installed with the tests and run unmodified in this
process on the same PNG frames and the same STAND-IN weights (the published Inception files cannot
be fetched here), each as its README calls it: `compute_fid(dir1, dir2, mode=...)`. The clean mode
loads the TorchScript Inception from the store's folder (clean-fid's own InceptionV3W class, passed
as its custom_feat_extractor: its default looks in /tmp); legacy_pytorch loads pytorch-fid's file
through torch.hub's cache (TORCH_HOME). torchmetrics 1.9.0 (with torch-fidelity 0.4.0), installed
with the tests too, is run unmodified the same way: its FrechetInceptionDistance loads the stand-in
pytorch-fid file (feature_extractor_weights_path). pytorch-fid itself: test_fid_fvd_parity.py."""
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.model_parity_set import cut
from theval_mesh.backends import stand_in
from theval_mesh.backends.classic import fid
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.errors import UsageRefused

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIPS = ROOT / "tests" / "data" / "parity" / "clips"
SETS = {"A": ("astronaut_de_gt", "tom_it_gt"), "B": ("t1center_en_gt", "t1left_de_gt")}  # other speakers
FRAMES = 6  # per clip
MODES = {"clean-fid": "clean", "clean-fid-legacy-pytorch": "legacy_pytorch"}


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """The stand-in store, each set's decoded frames, and the same frames as PNG files in a folder per set."""
    root = tmp_path_factory.mktemp("fid-variants")
    stand_in.write(root / "store", 0, models=(), classic=["fid-inception", "fid-inception-torchscript"])
    frames = {}
    for side, names in SETS.items():
        (root / side).mkdir()
        frames[side] = []
        for name in names:
            reader = MediaReader(CLIPS / f"{name}.mp4")
            try:
                for i, frame in itertools.islice(reader.frames(), FRAMES):
                    Image.fromarray(frame).save(root / side / f"{name}_{i:03d}.png")  # lossless: the same pixels
                    frames[side].append(frame)
            finally:
                reader.close()
    return root, frames


def their_extractor(mode: str, store: Path, monkeypatch):
    """clean-fid's own feature extractor of `mode`, its weights taken from the stand-in store."""
    import torch
    from cleanfid.features import build_feature_extractor
    from cleanfid.inception_torchscript import InceptionV3W

    if mode == "clean":
        net = InceptionV3W(str(store), download=False).eval()
        return lambda x: net(x)
    hub = store.parent / "torch-home" / "hub" / "checkpoints"
    hub.mkdir(parents=True, exist_ok=True)
    weights = hub / "pt_inception-2015-12-05-6726825d.pth"
    if not weights.exists():
        weights.symlink_to(store / weights.name)
    monkeypatch.setenv("TORCH_HOME", str(store.parent / "torch-home"))
    return build_feature_extractor(mode, torch.device("cpu"), use_dataparallel=False)


@pytest.mark.parametrize("variant", list(MODES))
def test_each_variant_gives_its_own_codes_features_and_fid(kit, variant, monkeypatch):
    import torch
    from cleanfid import fid as cleanfid

    root, frames = kit
    mode, store = MODES[variant], root / "store"
    extractor = their_extractor(mode, store, monkeypatch)
    common = {"mode": mode, "num_workers": 0, "batch_size": 4, "device": torch.device("cpu"), "verbose": False}
    theirs = cleanfid.get_folder_features(str(root / "A"), model=extractor, **common)
    ours = fid.inception_features(frames["A"], store=store, variant=variant, batch_size=4).features
    assert ours.shape == theirs.shape == (2 * FRAMES, fid.FEATURES)
    # (their files are listed sorted, ours in the same order: the names sort by clip, then frame)
    assert np.abs(ours - theirs).max() <= 1e-5 * np.abs(theirs).max()
    expected = cleanfid.compute_fid(str(root / "A"), str(root / "B"), custom_feat_extractor=extractor, **common)
    b = fid.inception_features(frames["B"], store=store, variant=variant, batch_size=4)
    assert fid.fid(ours, b) == pytest.approx(expected, rel=1e-5)


def test_the_torchmetrics_variant_gives_torchmetrics_features_and_fid(kit):
    """FrechetInceptionDistance(feature=2048) as its docs call it, on uint8 (B, 3, H, W) batches:
    its network's features of set A, and compute() of A (fake) against B (real)."""
    import torch
    from torchmetrics.image.fid import FrechetInceptionDistance

    root, frames = kit
    store = root / "store"
    metric = FrechetInceptionDistance(feature=2048,
                                      feature_extractor_weights_path=str(store / "pt_inception-2015-12-05-6726825d.pth"))

    def batch(side):
        return torch.from_numpy(np.stack(frames[side])).permute(0, 3, 1, 2).contiguous()

    with torch.no_grad():
        theirs = metric.inception(batch("A")).double().numpy()
    ours = fid.inception_features(frames["A"], store=store, variant="torchmetrics", batch_size=4).features
    assert ours.shape == theirs.shape == (2 * FRAMES, fid.FEATURES)
    assert np.abs(ours - theirs).max() <= 1e-5 * np.abs(theirs).max()
    metric.update(batch("B"), real=True)
    metric.update(batch("A"), real=False)
    expected = float(metric.compute())
    b = fid.inception_features(frames["B"], store=store, variant="torchmetrics", batch_size=4).features
    assert fid.VARIANTS["torchmetrics"].distance(ours, b) == pytest.approx(expected, rel=1e-5)


def test_the_variants_differ_by_their_pipeline_and_agree_where_it_is_the_same(kit):
    """With one network's weights in both files, clean mode differs from pytorch-fid by its resize
    (PIL bicubic, antialiased) and its normalisation ((x - 128) / 128); legacy_pytorch resizes the
    [0, 255] frame where pytorch-fid resizes the [0, 1] one, which bilinear interpolation does not
    tell apart: the same features to float rounding. A set against itself is 0 (one square root
    of a 2048 x 2048 product: checked on the new variant only)."""
    root, frames = kit
    store = root / "store"
    features = {v: fid.inception_features(frames["A"], store=store, variant=v, batch_size=4).features
                for v in fid.VARIANTS}
    scale = np.abs(features["pytorch-fid"]).max()
    assert np.abs(features["clean-fid"] - features["pytorch-fid"]).max() > 1e-3 * scale
    assert np.abs(features["clean-fid-legacy-pytorch"] - features["pytorch-fid"]).max() <= 1e-5 * scale
    assert fid.fid(features["clean-fid"], features["clean-fid"]) == pytest.approx(0, abs=1e-3)
    # torchmetrics resizes with antialiasing (these frames are 512 px): not pytorch-fid's features
    assert np.abs(features["torchmetrics"] - features["pytorch-fid"]).max() > 1e-3 * scale


def test_the_command_names_the_variant_computes_them_all_and_needs_its_network(kit, tmp_path):
    """`classic(fid_variant="clean-fid", all_variants=True)`: the FID column is clean-fid's, from the
    TorchScript file, said in its provenance and written in every format; every variant's value
    sits beside it, from the same frames. A store without the file leaves FID empty, naming it."""
    import theval_mesh

    root, _ = kit
    for side in ("gt", "m"):
        (tmp_path / side).mkdir()
    cut("astronaut_de_gt", 8, tmp_path / "gt" / "a.mp4")
    cut("astronaut_de_noisy", 8, tmp_path / "m" / "a.mp4")
    run = theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, tmp_path / "out", store=root / "store",
                              fid_variant="clean-fid", all_variants=True, hf_dataset="someone/talking-heads")
    assert run.summary[0]["FID"] > 0
    assert "FID variant clean-fid (GaParmar/clean-fid 0.1.35 (c8ffa42), mode clean)" in run.provenance["FID"]
    assert "inception-2015-12-05.pt" in run.provenance["FID"] and "(stand-in:0)" in run.provenance["FID"]
    vbench = json.loads((tmp_path / "out" / "vbench" / "m_eval_results.json").read_text())
    assert vbench["fid"] == [run.summary[0]["FID"], []] and vbench["ssim"][1][0]["video_path"].endswith("m/a.mp4")
    hub = (tmp_path / "out" / "hf" / "m" / ".eval_results" / "theval-classic.yaml").read_text()
    assert 'task_id: "fid"' in hub and "clean-fid 0.1.35" in hub and "STAND-IN" in hub
    # every variant on the same frames, side by side
    fids = {v: run.variants[("m", "FID", v)] for v in fid.VARIANTS}
    assert fids["clean-fid"] == run.summary[0]["FID"]
    assert fids["clean-fid-legacy-pytorch"] == pytest.approx(fids["pytorch-fid"], rel=1e-4)
    assert fids["clean-fid"] != pytest.approx(fids["pytorch-fid"], rel=1e-4)
    assert fids["torchmetrics"] != pytest.approx(fids["pytorch-fid"], rel=1e-4)
    assert not any(c != "FID" for _, c, _ in run.variants)  # no SyncNet in this store: no LSE variants
    table = (tmp_path / "out" / "classic_variants.md").read_text()
    assert table.startswith("WARNING: computed with STAND-IN weights") and "| clean-fid (default) | clean-fid-legacy" in table
    assert "- clean-fid: GaParmar/clean-fid 0.1.35 (c8ffa42), mode clean" in table
    rows = (tmp_path / "out" / "classic_variants.csv").read_text().splitlines()
    assert rows[0] == "model,metric,variant,follows,value,spread" and len(rows) == 1 + len(fid.VARIANTS)
    # a paper's frame sampling: every 3rd frame of each video, said in the provenance and counted
    run = theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, store=root / "store", fid_frames="every:3")
    assert run.samples[("m", "FID")][:2] == (3, 3) and "frames of each video: every:3" in run.provenance["FID"]
    with pytest.raises(UsageRefused, match="--fid-frames: FID frame sampling 'every3'"):
        theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, store=root / "store", fid_frames="every3")
    stand_in.write(tmp_path / "only-pytorch-fid", 0, models=(), classic=["fid-inception"])
    run = theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, store=tmp_path / "only-pytorch-fid",
                              fid_variant="clean-fid")
    assert np.isnan(run.summary[0]["FID"])
    assert any("inception-2015-12-05.pt not in the weights store" in s for s in run.skipped)
    with pytest.raises(UsageRefused, match="--fid-variant 'torch-fid': one of pytorch-fid, clean-fid"):
        theval_mesh.classic(tmp_path / "gt", {"m": tmp_path / "m"}, store=root / "store", fid_variant="torch-fid")
