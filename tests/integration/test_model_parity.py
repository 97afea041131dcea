"""`theval evaluate --profile reference` against the reference's OWN model-based scripts, on the
same deterministic STAND-IN weights (tests/data/parity/models; fake weights: the published ones
cannot be fetched here, see fake_weights.py).

The weights' values do not matter for what is compared: the reference's preprocessing, cropping,
batching, face detection and alignment, colour order, resizing and averaging. The committed values
come from Newbyl/THEval 3603338's Video_Quality/global_aesthetic.py, mouth_quality.py and
face_quality.py run unmodified in the reference's pinned environment (pyiqa 0.1.13, facexlib 0.3.0,
torch 2.6.0, decord, mediapipe 0.10.21) on clips of the parity set cut to their first frames
(tests/data/parity/models/README.md has the command). Target (the issue's): per metric, relative
difference median <= 0.5 % and max <= 2 %.

For CI's time (the real-size networks cost about 2 s per frame on 2 cores) the tests take half of
the clips, one of each face: a degraded one (blur, exaggerated mouth) and a GT one of each
language. Shorter cuts would not do: mouth quality's MUSIQ scores a batch of crops on one canvas
as large as its largest crop, so a frame's score depends on the other frames of the clip.
"""
import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.model_parity_set import DIR, METRICS, SEED, clips, cut, first_frames, frames_of, oracle
from tests.support.parity_set import clip
from theval_mesh.pure.exit_codes import EXIT_NOT_RANKED
from theval_mesh.stores.job_store import SqlJobStore

pytestmark = pytest.mark.slow
THEVAL = str(Path(sys.executable).parent / "theval")
TAG = ""  # model_oracle.csv: the CI set


@pytest.fixture(scope="module")
def cut_clips(tmp_path_factory):
    n = frames_of(TAG)
    folder = tmp_path_factory.mktemp("model-parity-gt")
    for name in clips(TAG):
        path = cut(name, n, folder / f"{name}.mp4")
        # the reference runner's cut keeps the original's decoded frames; so must ours
        assert all(np.array_equal(a, b) for a, b in
                   zip(first_frames(path, n + 1), first_frames(clip(name), n), strict=True))
    return folder


def _relative(ours: float, ref: float) -> float:
    return abs(ours - ref) / abs(ref)


def _evaluate(clips_dir: Path, out: Path, *options) -> dict:
    """Our results per clip of `theval evaluate --profile reference` on every clip of clips_dir
    (read from the run's store)."""
    run = subprocess.run([THEVAL, "evaluate", "--gt", str(clips_dir), "--out", str(out), "--inline",
                          "--quiet", "--profile", "reference", *options],
                         capture_output=True, text=True, timeout=1500)
    # The clips are cut before anyone speaks: the GT row cannot normalise lip sync, so there is
    # no leaderboard (exit 4); every video's scores are written and in the run's store all the same.
    assert run.returncode == EXIT_NOT_RANKED and "Lip sync" in run.stderr, run.stderr[-2000:]
    assert (out / "results.jsonl").is_file() and not (out / "leaderboard.csv").exists()
    store = SqlJobStore(out / "results.sqlite")
    try:
        (job,) = store.jobs()
        results = {Path(r.video).stem: r for r in store.results(job.id)}
    finally:
        store.close()
    assert set(results) == {p.stem for p in clips_dir.glob("*.mp4")}
    assert all(r.status == "ok" for r in results.values())
    return results


def _compare(results: dict, tag: str) -> None:
    """Relative differences per metric against model_oracle{tag}.csv, held to the target."""
    expected, report = oracle(tag), []
    for metric, key in METRICS[tag].items():
        diffs = [_relative(results[name].metrics[key], float(expected[(name, metric)]["full"]))
                 for name in results]
        report.append(f"{metric}: median {np.median(diffs):.5%} max {max(diffs):.5%}")
        assert np.median(diffs) <= 0.005 and max(diffs) <= 0.02, report
    print("; ".join(report))


def half_of(cut_clips: Path, tag: str, folder: Path) -> Path:
    """One clip of each face (every other name in sorted order), linked into `folder`."""
    folder.mkdir()
    for name in clips(tag)[::2]:
        (folder / f"{name}.mp4").symlink_to(cut_clips / f"{name}.mp4")
    return folder


def test_quality_metrics_match_the_reference_scripts_on_stand_in_weights(cut_clips, fake_store,
                                                                         tmp_path):
    results = _evaluate(half_of(cut_clips, TAG, tmp_path / "clips"), tmp_path / "out", "--quality", "paper", "--headpose", "rigid-fit",
                        "--weights-store", str(fake_store))
    _compare(results, TAG)
    for key in METRICS[TAG].values():  # the stand-ins do not saturate: every model's scores move
        assert all(np.std(r.trace[key]) > 0 for r in results.values()), key

    prov = next(iter(results.values())).provenance
    for key in METRICS[TAG].values():  # the numbers name the weights that made them
        assert prov["quality"][key].endswith(f"weights: stand-in:{SEED}"), prov["quality"][key]
    assert any("stand-in weights" in b for b in prov["published_gt_blockers"])


def test_head_motion_matches_the_reference_script_with_facexformer(cut_clips, headpose_store,
                                                                    tmp_path):
    """The quality models are the labelled proxy here (their parity is the test above): this run
    is about head pose, the reference's way, on half of the clips as above."""
    results = _evaluate(half_of(cut_clips, TAG, tmp_path / "clips"), tmp_path / "out", "--quality", "proxy", "--headpose",
                        "facexformer", "--weights-store", str(headpose_store))
    _compare(results, "_head_motion")
    for r in results.values():  # FaceXFormer's angles move from frame to frame on the stand-ins
        assert all(np.std(r.trace[k]) > 0 for k in ("pitch", "yaw", "roll")), r.video
    prov = next(iter(results.values())).provenance
    assert prov["headpose"].startswith("facexformer") and f"stand-in:{SEED}" in prov["headpose"]
    assert not any("rigid" in b for b in prov["published_gt_blockers"])


def _centre_pick(ranked: np.ndarray, h: int, w: int) -> np.ndarray:
    """The box facexlib keeps from detect_faces' ranked boxes (x0, y0, x1, y1, score; NMS at 0.4,
    detect_faces' own) with only_center_face (get_face_landmarks_5)."""
    from facexlib.detection.retinaface_utils import py_cpu_nms
    from facexlib.utils.face_restoration_helper import get_center_face
    return get_center_face(list(ranked[py_cpu_nms(ranked, 0.4)]), h, w)[0][:4]


def _ties_that_change_the_pick(ranked: np.ndarray, h: int, w: int) -> int:
    """Pairs of scores within 4 float32 ulps of each other (another CPU's kernels may rank them the
    other way) whose swap changes the box picked."""
    picked, near = _centre_pick(ranked, h, w), 4 * np.spacing(np.float32(1))
    changed = 0
    for a, b in zip(*np.nonzero(np.triu(np.abs(ranked[:, None, 4] - ranked[None, :, 4]) <= near, 1))):
        swapped = ranked.copy()
        swapped[[a, b], :4] = swapped[[b, a], :4]
        changed += not np.array_equal(_centre_pick(swapped, h, w), picked)
    return changed


def test_the_stand_in_detector_picks_the_references_box_and_lands_on_the_face(cut_clips,
                                                                              fake_store, monkeypatch):
    """face_quality's facexlib RetinaFace on the stand-in weights (backends/stand_in/detectors.py):
    on these centred talking heads (every other frame of each clip) its box holds the face
    (FaceMesh's nose tip) on >= 90 % of the frames, our pipeline picks the box the reference
    picked, frame by frame, and no near-tie of scores decides which (the detector once saturated
    its scores, and the box picked, the oracle's and so face quality differed between CPUs with
    and without AVX-512)."""
    import facexlib.detection.retinaface as facexlib_retinaface

    from theval_mesh.backends.landmarks.backend import FaceTracker
    from theval_mesh.backends.landmarks.passes import MOUTH_QUALITY
    from theval_mesh.backends.quality.backend import QualityBackend

    expected = {}
    with open(DIR / f"model_oracle_frames{TAG}.csv") as f:
        for row in csv.DictReader(f):
            if row["metric"] == "face_quality" and row["detail"]:
                expected[(row["clip"], int(row["frame"]))] = json.loads(row["detail"])["box"][:4]
    qb = QualityBackend(mode="paper", store=fake_store)
    helper = qb.models.load("topiq_nr-face").net.face_helper
    chosen = []
    original = helper.get_face_landmarks_5

    def record(*args, **kwargs):
        n = original(*args, **kwargs)
        chosen.append(np.asarray(helper.det_faces).ravel()[:4].copy() if n else None)
        return n

    helper.get_face_landmarks_5 = record
    nms, ranked = facexlib_retinaface.py_cpu_nms, []
    monkeypatch.setattr(facexlib_retinaface, "py_cpu_nms",
                        lambda dets, thresh: (ranked.append(dets.copy()), nms(dets, thresh))[1])
    names = clips(TAG)[::2]
    # every other frame: each frame's box is found on that frame alone (the quality test scores them all)
    kept = range(0, frames_of(TAG), 2)
    inside, total = 0, 0
    for name in names:
        frames = first_frames(cut_clips / f"{name}.mp4", frames_of(TAG), "rgb24")[::2]
        chosen.clear()
        ranked.clear()
        qb.face_quality(frames)
        assert len(chosen) == len(ranked) == len(frames)
        for i, (frame, dets) in zip(kept, zip(frames, ranked)):
            assert 1 < len(dets) < 300, (name, i, len(dets))  # some of the 256 that can fire (26-157 measured)
            assert _ties_that_change_the_pick(dets, *frame.shape[:2]) == 0, (name, i)
        with FaceTracker(MOUTH_QUALITY) as tracker:
            for i, frame, box in zip(kept, frames, chosen, strict=True):
                assert box is not None
                np.testing.assert_allclose(box, expected[(name, i)], atol=0.01)
                points = tracker.process(frame)
                if points is not None:
                    h, w = frame.shape[:2]
                    x, y = points[1, 0] * w, points[1, 1] * h  # nose tip
                    inside += bool(box[0] <= x <= box[2] and box[1] <= y <= box[3])
                total += 1
    assert inside >= 0.9 * total, (inside, total)
