"""AKD against its OWN code: AliaksandrSiarohin/pose-evaluation's extract.py (face_pose) and
cmp_kp.py with face-alignment 3750f83, run unmodified by
tests/data/parity/reference-env/run_akd_reference.py on the same STAND-IN weights (fake weights:
2DFAN-4.pth.tar and s3fd_convert.pth cannot be fetched here) and the same frames (parity clips
decoded by the project, resized to 256 x 256 as FOMM's evaluation videos are). Target: every
landmark of the first face identical (they are integer pixels), the same frames without a face,
and AKD equal."""
import itertools
import json

import cv2
import numpy as np
import pytest

from tests.support.parity_set import DIR as PARITY_DIR
from tests.support.parity_set import clip
from theval_mesh.backends import stand_in
from theval_mesh.backends.classic import fan
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.metrics import akd
from theval_mesh.studies.classic_metrics import compare, keypoints

pytestmark = pytest.mark.slow
ORACLE = json.loads((PARITY_DIR / "classic" / "akd_oracle.json").read_text())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("fan-stand-in")
    stand_in.write(store, 0, models=(), classic=["fan-2d", "s3fd-fa"])
    return store


@pytest.fixture(scope="module")
def face_alignment(store):
    return fan.FaceAlignment(store)


FRAMES = {"astronaut_de": 4, "tom_it": 2}  # of each speaker's pair in `pairs`


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """gt/ and m/: two speakers' videos at 256 x 256, of 4 and 2 frames; m's are other clips of
    the same speaker (a noisy one, a static head)."""
    from tests.support.video_files import write_video

    root = tmp_path_factory.mktemp("akd-pairs")
    for side, suffix in (("gt", "gt"), ("m", "noisy")):
        (root / side).mkdir()
        for speaker, n in FRAMES.items():
            source = "tom_it_static_head" if (speaker, side) == ("tom_it", "m") else f"{speaker}_{suffix}"
            images = [cv2.resize(rgb, (256, 256), interpolation=cv2.INTER_AREA)
                      for _, rgb in itertools.islice(MediaReader(clip(source)).frames(), n)]
            write_video(root / side / f"{speaker}.mp4", images)
    return root


def _landmarks(face_alignment, name: str) -> list:
    out = []
    for i, rgb in MediaReader(clip(name)).frames():
        if i >= ORACLE["frames"]:
            break
        frame = cv2.resize(rgb, (ORACLE["side"], ORACLE["side"]), interpolation=cv2.INTER_AREA)
        found = face_alignment.get_landmarks(frame, first_only=True)
        out.append(None if found is None else found[0])
    return out


def test_landmarks_and_akd_equal_pose_evaluations_own(face_alignment):
    pairs = []
    for gt, generated in ORACLE["pairs"]:
        ours = {role: _landmarks(face_alignment, name) for role, name in (("gt", gt), ("generated", generated))}
        for role, points in ours.items():
            theirs = ORACLE["landmarks"][role][gt]  # a pair's two folders share the GT's name
            assert len(points) == len(theirs) == ORACLE["frames"]
            for i, p in enumerate(points):
                t = theirs[str(i)]
                assert (p is None) == (t is None), (role, gt, i)
                if p is not None:
                    np.testing.assert_array_equal(p, np.array(t, np.float32), err_msg=f"{role} {gt} frame {i}")
        pairs.append(akd.keypoint_distances(ours["gt"], ours["generated"]))
    assert sum(len(p.distances) for p in pairs) > 0
    assert akd.akd(pairs) == pytest.approx(ORACLE["akd"], rel=1e-12)


def test_the_classic_command_gives_each_pairs_akd_and_weighs_a_models_frames_not_its_videos(store, face_alignment,
                                                                                           pairs, tmp_path):
    """`classic()` with FAN's stand-ins in the store: each pair's AKD is that of the proven
    landmarks on the same decoded frames, and the model's is over all frames (pose-evaluation's),
    here unlike the mean of its two videos (4 and 2 frames). Without the weights, AKD is empty and
    says which file it needs."""
    import theval_mesh

    first = keypoints(face_alignment).of
    frames = FRAMES
    run = theval_mesh.classic(pairs / "gt", {"m": pairs / "m"}, store=store)
    rows = {r.video.split("/")[-1][:-4]: r for r in run.rows}
    for speaker, n in frames.items():
        row = rows[speaker]
        decoded = {side: [rgb for _, rgb in MediaReader(pairs / side / f"{speaker}.mp4").frames()]
                   for side in ("gt", "m")}
        pair = akd.keypoint_distances([first(f) for f in decoded["gt"]], [first(f) for f in decoded["m"]])
        assert row.akd_frames == n == len(pair.distances)
        assert row.akd == pytest.approx(pair.distances.mean(), rel=1e-12)
    summary = run.summary[0]
    weighted = (rows["astronaut_de"].akd * 4 + rows["tom_it"].akd * 2) / 6
    assert summary["AKD"] == pytest.approx(weighted, rel=1e-12)
    assert summary["AKD"] != pytest.approx((rows["astronaut_de"].akd + rows["tom_it"].akd) / 2, rel=1e-6)
    assert summary["n:AKD"] == 2 and summary["AKD CI low"] <= summary["AKD"] <= summary["AKD CI high"]
    assert "cmp_kp.py" in run.provenance["AKD"] and "(stand-in:0)" in run.provenance["AKD"]
    (tmp_path / "empty-store").mkdir()
    bare = theval_mesh.classic(pairs / "gt", {"m": pairs / "m"}, store=tmp_path / "empty-store")
    assert np.isnan(bare.summary[0]["AKD"])
    assert any("2DFAN-4.pth.tar not in the weights store" in s for s in bare.skipped)


def test_a_gt_videos_keypoints_are_found_once_for_every_model_compared_with_it(face_alignment, pairs):
    """The real FAN stand-in, its calls counted: a second model's pair with the same GT video
    detects only its own frames and gives the same AKD."""
    calls = []

    class Counted:
        def get_landmarks(self, rgb, first_only):
            calls.append(rgb.shape)
            return face_alignment.get_landmarks(rgb, first_only=first_only)

    counted = keypoints(Counted())
    video, gt = str(pairs / "m" / "astronaut_de.mp4"), str(pairs / "gt" / "astronaut_de.mp4")
    once = compare(video, gt, keypoints=counted)
    assert len(calls) == 2 * FRAMES["astronaut_de"] and once["akd_frames"] == FRAMES["astronaut_de"]
    again = compare(video, gt, keypoints=counted)
    assert len(calls) == 3 * FRAMES["astronaut_de"] and again["akd"] == once["akd"]
