"""AED (First Order Motion Model's: identity) against its OWN code: AliaksandrSiarohin/pose-evaluation's
extract.py (face_id) and cmp.py with thnkim/OpenFacePytorch d002218, run unmodified by
tests/data/parity/reference-env/run_aed_reference.py on the same STAND-IN openface.pth (fake weights:
the published file cannot be fetched here) and the same frames (parity clips decoded by the project,
resized to 256 x 256 as FOMM's evaluation videos are). Target: every frame's embedding equal to 1e-6
of the largest (they come out bitwise equal here) and AED equal. The stand-in's embeddings respond to
what the pipeline does: reading the frame as RGB instead of BGR moves one by 0.014, scikit-image's
later anti-aliasing by 0.0025, against values up to 0.27."""
import itertools
import json

import cv2
import numpy as np
import pytest

from tests.support.parity_set import DIR as PARITY_DIR
from tests.support.parity_set import clip
from theval_mesh.backends import stand_in
from theval_mesh.backends.classic import openface
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.metrics import aed
from theval_mesh.studies.classic_metrics import compare, identities

pytestmark = pytest.mark.slow
ORACLE = json.loads((PARITY_DIR / "classic" / "aed_oracle.json").read_text())
FRAMES = {"astronaut_de": 4, "tom_it": 2}  # of each speaker's pair in `pairs`


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("openface-stand-in")
    marker = stand_in.write(store, 0, models=(), classic=["openface"])
    assert {k: v["sha256"] for k, v in marker["files"].items()} == ORACLE["weights"]
    return store


@pytest.fixture(scope="module")
def net(store):
    return openface.load(store)


def _frames(name: str, side: int, count: int) -> list:
    """The clip's first `count` frames (decoded no further), resized with OpenCV's INTER_AREA."""
    return [cv2.resize(rgb, (side, side), interpolation=cv2.INTER_AREA)
            for _, rgb in itertools.islice(MediaReader(clip(name)).frames(), count)]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """gt/ and m/: two speakers' videos at 256 x 256, of 4 and 2 frames (m: a noisy clip, a static head)."""
    from tests.support.video_files import write_video

    root = tmp_path_factory.mktemp("aed-pairs")
    for side, suffix in (("gt", "gt"), ("m", "noisy")):
        (root / side).mkdir()
        for speaker, n in FRAMES.items():
            source = "tom_it_static_head" if (speaker, side) == ("tom_it", "m") else f"{speaker}_{suffix}"
            write_video(root / side / f"{speaker}.mp4", _frames(source, 256, n))
    return root


def test_embeddings_and_aed_equal_pose_evaluations_own(net):
    distances = []
    for gt, generated in ORACLE["pairs"]:
        ours = {role: openface.embeddings(net, _frames(name, ORACLE["side"], ORACLE["frames"]))
                for role, name in (("gt", gt), ("generated", generated))}
        for role, values in ours.items():
            theirs = np.array([ORACLE["embeddings"][role][gt][str(i)] for i in range(ORACLE["frames"])], np.float32)
            assert np.abs(values - theirs).max() <= 1e-6 * np.abs(theirs).max(), (role, gt)
        distances.append(aed.embedding_distances(ours["gt"], ours["generated"]))
    assert np.concatenate(distances).mean() == pytest.approx(ORACLE["aed"], rel=1e-6)


def test_the_classic_command_gives_each_pairs_aed_and_weighs_a_models_frames(store, net, pairs, tmp_path):
    """`classic()` with the OpenFace stand-in in the store: each pair's AED is that of the proven
    embeddings on the same decoded frames, and the model's is over all frames (cmp.py's mean),
    unlike the mean of its two videos (4 and 2 frames). Without the file, AED is empty and says
    which file it needs."""
    import theval_mesh

    run = theval_mesh.classic(pairs / "gt", {"m": pairs / "m"}, store=store)
    rows = {r.video.split("/")[-1][:-4]: r for r in run.rows}
    for speaker, n in FRAMES.items():
        decoded = {side: [rgb for _, rgb in MediaReader(pairs / side / f"{speaker}.mp4").frames()] for side in ("gt", "m")}
        expected = aed.embedding_distances(openface.embeddings(net, decoded["gt"]), openface.embeddings(net, decoded["m"]))
        assert rows[speaker].aed_frames == n == len(expected)
        assert rows[speaker].aed == pytest.approx(expected.mean(), rel=1e-12)
    summary = run.summary[0]
    weighted = (rows["astronaut_de"].aed * 4 + rows["tom_it"].aed * 2) / 6
    assert summary["AED"] == pytest.approx(weighted, rel=1e-12)
    assert summary["AED"] != pytest.approx((rows["astronaut_de"].aed + rows["tom_it"].aed) / 2, rel=1e-6)
    assert summary["n:AED"] == 2 and summary["AED CI low"] <= summary["AED"] <= summary["AED CI high"]
    assert "cmp.py" in run.provenance["AED"] and "identity" in run.provenance["AED"]
    assert "(stand-in:0)" in run.provenance["AED"]
    (tmp_path / "empty-store").mkdir()
    bare = theval_mesh.classic(pairs / "gt", {"m": pairs / "m"}, store=tmp_path / "empty-store")
    assert np.isnan(bare.summary[0]["AED"])
    assert any("openface.pth not in the weights store" in s for s in bare.skipped)


def test_a_gt_videos_embeddings_are_computed_once_for_every_model_compared_with_it(net, pairs):
    """A second model's pair with the same GT video embeds only its own frames and gives the same AED."""
    measure = identities(net)
    calls = []
    embed = measure.of
    measure.of = lambda rgb: calls.append(1) or embed(rgb)
    video, gt = str(pairs / "m" / "astronaut_de.mp4"), str(pairs / "gt" / "astronaut_de.mp4")
    once = compare(video, gt, identities=measure)
    assert len(calls) == 2 * FRAMES["astronaut_de"] and once["aed_frames"] == FRAMES["astronaut_de"]
    again = compare(video, gt, identities=measure)
    assert len(calls) == 3 * FRAMES["astronaut_de"] and again["aed"] == once["aed"]
