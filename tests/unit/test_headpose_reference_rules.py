"""Head motion with FaceXFormer, as Naturalness/head_motion_dynamics.py (Newbyl/THEval 3603338)
decides which frames count: its frame count, its dropped partial batch, one face-less frame
dropping the whole video; and `--headpose` choosing the estimator."""
import numpy as np
import pytest

from theval_mesh.backends.headpose import facexformer
from theval_mesh.core.compute import compute_metrics
from theval_mesh.core.frame_pass import FrameSeries
from theval_mesh.core.stages import facexformer_pose
from theval_mesh.pure.errors import WeightsMissing
from theval_mesh.pure.metrics.head_motion import head_motion, reference_drop_reason, reference_frame_count


def test_the_reference_reads_up_to_the_header_count_and_drops_a_partial_batch_after_a_failed_read():
    assert reference_frame_count(decoded=300, header=300) == 300
    assert reference_frame_count(decoded=310, header=300) == 300  # the loop stops at the count
    assert reference_frame_count(decoded=290, header=300) == 256  # 34 pending frames never scored
    assert reference_frame_count(decoded=100, header=300) == 0


def test_one_frame_without_a_face_drops_the_video():
    found = np.ones(20, bool)
    assert reference_drop_reason(found, 20, 20) == (20, None)
    found[7] = False
    n, reason = reference_drop_reason(found, 20, 20)
    assert n == 20 and "frame 7" in reason and "drops" in reason
    # a face-less frame past what the reference reads does not count
    assert reference_drop_reason(found, 20, 5) == (5, None)


def _series(rows, header=None) -> FrameSeries:
    fs = FrameSeries(512, 512, 25.0, frame_count=len(rows), header_frames=header or len(rows))
    fs.head_pose = np.array(rows, dtype=np.float64)
    return fs


ROWS = [[10.0 + i % 3, -5.0 + i, 2.0 * (i % 2), 250.0 + i, 260.0 - i] for i in range(12)]


def test_reference_profile_drops_the_video_and_paper_drops_the_frame():
    rows = [list(r) for r in ROWS]
    rows[4] = [np.nan] * 5
    ref = facexformer_pose(_series(rows), "reference")
    assert ref.dropped and "frame 4" in ref.dropped
    paper = facexformer_pose(_series(rows), "paper")
    assert paper.dropped is None
    kept = np.array([r for i, r in enumerate(ROWS) if i != 4]).T
    assert head_motion(paper.pitch, paper.yaw, paper.roll, paper.cx, paper.cy) == pytest.approx(
        head_motion(*kept))


def test_frames_past_the_header_count_are_not_scored_in_the_reference_profile():
    pose = facexformer_pose(_series(ROWS, header=9), "reference")
    assert pose.dropped is None and np.isnan(pose.pitch[9:]).all() and not np.isnan(pose.pitch[:9]).any()


def test_a_dropped_video_has_nan_head_motion_with_the_reason(monkeypatch):
    from theval_mesh.backends.audio.series import AudioSeries
    from theval_mesh.backends.landmarks.series import LandmarkSeries
    from theval_mesh.pure.settings import RunSettings

    rows = [list(r) for r in ROWS]
    rows[0] = [np.nan] * 5
    fs = _series(rows)
    single = LandmarkSeries(478)
    for i in range(len(rows)):
        single.append(i, np.full((478, 3), 0.5, np.float32))
    fs.landmarks = {"single": single}
    values = compute_metrics(fs, facexformer_pose(fs, "reference"), AudioSeries(), RunSettings())
    assert np.isnan(values.values["head_motion"])
    assert "frame 0" in values.nan_reasons["head_motion"]


def test_headpose_modes_choose_the_estimator_without_loading_anything(tmp_path, headpose_store):
    assert facexformer.choose("rigid-fit", headpose_store)[0] is False
    assert facexformer.choose("auto", headpose_store)[0] is True
    use, notice = facexformer.choose("auto", tmp_path)
    assert use is False and "model.pt" in notice and "not comparable" in notice
    with pytest.raises(WeightsMissing, match="--headpose facexformer needs model.pt, retinaface.h5"):
        facexformer.choose("facexformer", tmp_path)
