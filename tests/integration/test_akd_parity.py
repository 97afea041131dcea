"""AKD against its OWN code: AliaksandrSiarohin/pose-evaluation's extract.py (face_pose) and
cmp_kp.py with face-alignment 3750f83, run unmodified by
tests/data/parity/reference-env/run_akd_reference.py on the same STAND-IN weights (fake weights:
2DFAN-4.pth.tar and s3fd_convert.pth cannot be fetched here) and the same frames (parity clips
decoded by the project, resized to 256 x 256 as FOMM's evaluation videos are). Target: every
landmark of the first face identical (they are integer pixels), the same frames without a face,
and AKD equal."""
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

pytestmark = pytest.mark.slow
ORACLE = json.loads((PARITY_DIR / "classic" / "akd_oracle.json").read_text())


@pytest.fixture(scope="module")
def face_alignment(tmp_path_factory):
    store = tmp_path_factory.mktemp("fan-stand-in")
    stand_in.write(store, 0, models=(), classic=["fan-2d", "s3fd-fa"])
    return fan.FaceAlignment(store)


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
