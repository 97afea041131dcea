"""GT reference sets in plain Python (jobs.reference_sets; real SQLite, real folders): which
videos a GT set is made of, who may create, replace and score against one, what a set refuses,
and the leaderboard of the models scored against one. Videos are scored by a function of the
test (the evaluator passes the mesh's), returning results with known metric values."""
import math
import os

import pytest

from theval_mesh.core.results import FAILED, OK, VideoResult
from theval_mesh.jobs.reference_sets import MAX_LABEL, GtVideo, ReferenceSets
from theval_mesh.jobs.reference_store import ReferenceStore
from theval_mesh.pure.errors import AccessDenied, AlreadyExists, NotFound, ServiceError, UserError, VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.scoring.errors import ScoringError
from theval_mesh.pure.scoring.names import KEYS, NAME_OF_KEY
from theval_mesh.pure.settings import RunSettings

DEFAULT = RunSettings(quality="proxy")
PROVENANCE = {"profile": "reference", "landmarks": "mediapipe==0.10.21"}


@pytest.fixture
def roots(tmp_path):
    root = tmp_path / "videos"
    root.mkdir()
    return root


@pytest.fixture
def sets(store_location, roots):
    store = ReferenceStore(store_location)
    yield ReferenceSets(store, (str(roots.resolve()),), DEFAULT, Limits())
    store.close()


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def result(model, video, value=2.0, status=OK, provenance=PROVENANCE, **metrics):
    values = {k: value for k in KEYS} | metrics
    return VideoResult(model, video, status, None if status == OK else "cannot decode", metrics=values,
                       settings=DEFAULT.key(), provenance=provenance)


def scorer(name="gt", values=None, failed=(), nan=None):
    """Scores the videos of GT set `name` as `values` says (by label; 2.0 by default); labels in
    `failed` are bad videos; `nan` = (key, reason): that metric is NaN with the reason."""
    def score(video: GtVideo):
        if video.label in failed:
            return result(name, video.label, status=FAILED, provenance={}), VideoError(video.label, "cannot decode")
        r = result(name, video.label, (values or {}).get(video.label, 2.0))
        if nan:
            r.metrics[nan[0]], r.nan_reasons[nan[0]] = math.nan, nan[1]
        return r, None
    return score


def a_set(sets, name="gt", owner="alice", videos=("a.mp4", "b.mp4"), **kw):
    return sets.create(name, owner, DEFAULT, [GtVideo(v, i) for i, v in enumerate(videos)], scorer(name, **kw), 2)


# ---------------------------------------------------------------------------- the videos of a GT set
def test_a_folder_stands_for_its_videos_as_the_folder_scan_of_evaluate_lists_them(sets, roots, tmp_path):
    gt = roots / "gt"
    for name in ("b.mp4", "a.MOV", "sub/c.webm", ".hidden.mkv", "notes.txt", "sub/deeper/d.avi"):
        touch(gt / name)
    outside = touch(tmp_path / "elsewhere" / "e.mp4")
    os.symlink(outside.parent, gt / "linked-folder")  # not followed: as `theval evaluate`
    os.symlink(gt / "b.mp4", gt / "z-link.mp4")  # a link to a file is a file
    got = sets.gt_videos([str(gt)])
    real = gt.resolve()
    expected = [real / n for n in (".hidden.mkv", "a.MOV", "b.mp4", "sub/c.webm", "sub/deeper/d.avi", "z-link.mp4")]
    assert got == [GtVideo(str(p), 0, str(p)) for p in expected]


def test_files_and_bytes_stand_for_themselves_and_an_empty_folder_for_nothing(sets, roots):
    clip, listed = touch(roots / "clip.mp4"), touch(roots / "list.txt")
    (roots / "empty").mkdir()
    uri = f"file://{clip}"
    got = sets.gt_videos([None, uri, str(roots / "empty"), str(listed), str(roots / "missing.mp4")])
    # as given: their labels are the URIs the caller gave; a .txt is a file here, not a list
    assert got == [GtVideo("<video bytes> #0", 0), GtVideo(uri, 1), GtVideo(str(listed), 3),
                   GtVideo(str(roots / "missing.mp4"), 4)]


def test_no_videos_or_a_path_outside_the_roots_is_refused(sets, roots, tmp_path):
    (roots / "empty").mkdir()
    with pytest.raises(UserError, match=r"no videos: give files, or folders holding \.mp4, \.mov"):
        sets.gt_videos([str(roots / "empty")])
    with pytest.raises(UserError, match="no videos"):
        sets.gt_videos([])
    touch(tmp_path / "secret" / "s.mp4")
    with pytest.raises(AccessDenied, match="outside the folders this server may read"):
        sets.gt_videos([str(roots), str(tmp_path / "secret")])
    with pytest.raises(VideoError, match="must be absolute"):
        sets.gt_videos(["relative/gt"])


# ---------------------------------------------------------------------------- creating a set
def test_a_set_is_the_mean_of_its_scored_videos_and_keeps_its_failures(sets):
    ref = a_set(sets, videos=("a.mp4", "b.mp4", "bad.mp4"), values={"a.mp4": 1.0, "b.mp4": 3.0},
                failed=("bad.mp4",))
    assert (ref.videos, ref.scored, ref.owner, ref.failures) == (3, 2, "alice", [("bad.mp4", "cannot decode")])
    assert ref.raw == {m: 2.0 for m in NAME_OF_KEY.values()} and set(ref.counts.values()) == {2}
    stored = sets.get("gt")
    assert (stored.raw, stored.failures, stored.settings) == (ref.raw, ref.failures, DEFAULT.key())
    assert [r.video for r in sets.store.reference_videos("gt")] == ["a.mp4", "b.mp4", "bad.mp4"]


def test_a_set_that_cannot_normalise_is_refused_and_not_stored(sets):
    with pytest.raises(UserError, match="no video of the GT set could be scored; first failure: a.mp4: cannot"):
        a_set(sets, failed=("a.mp4", "b.mp4"))
    with pytest.raises(UserError, match=r"cannot normalise Lip sync \(zero or NaN over all its videos: Lip sync: "
                                        r"no speech\); add videos"):
        a_set(sets, nan=("lip_sync", "no speech"))
    with pytest.raises(UserError, match=r"cannot normalise Global aesthetic, .*, Lip sync \(zero or NaN over all "
                                        r"its videos\); add"):  # zero everywhere, no reason recorded
        a_set(sets, values={"a.mp4": 0.0, "b.mp4": 0.0})
    assert sets.all() == []


def test_a_mesh_failure_fails_the_whole_set(sets):
    def score(video):
        if video.label == "b.mp4":
            return result("gt", "b.mp4", status=FAILED), ServiceError("UNAVAILABLE", "the landmarks service is down")
        return result("gt", video.label), None
    with pytest.raises(ServiceError, match="landmarks service is down"):
        sets.create("gt", "alice", DEFAULT, [GtVideo("a.mp4", 0), GtVideo("b.mp4", 1)], score, 2)
    assert sets.all() == []


def test_only_its_owner_replaces_a_set_and_only_when_asked(sets):
    assert sets.check_create("gt", "alice", replace=False) == "gt"
    a_set(sets)
    with pytest.raises(AlreadyExists, match="set replace to score it again"):
        sets.check_create("gt", "alice", replace=False)
    with pytest.raises(AccessDenied, match="belongs to another caller"):
        sets.check_create("gt", "bob", replace=True)
    assert sets.check_create("gt", "alice", replace=True) == "gt"
    with pytest.raises(UserError, match="reference set name 'bad\\\\nname'"):
        sets.check_create("bad\nname", "alice", replace=False)


# ---------------------------------------------------------------------------- scoring against a set
def test_the_rules_of_a_video_scored_against_a_set(sets):
    assert sets.check_evaluate("", "", "", "alice") is None  # raw metrics only
    with pytest.raises(NotFound, match=r"no GT reference set named 'gt' \(stored: none yet; create one"):
        sets.check_evaluate("gt", "m", "", "alice")
    a_set(sets)
    a_set(sets, name="gt2")
    with pytest.raises(NotFound, match=r"no GT reference set named 'nope' \(stored: gt, gt2\)"):
        sets.check_evaluate("nope", "m", "", "alice")
    assert sets.check_evaluate("gt", "m", "clip one", "alice").name == "gt"
    with pytest.raises(UserError, match="has the name of the reference set"):
        sets.check_evaluate("gt", "gt", "", "alice")
    with pytest.raises(UserError, match=f"name: at most {MAX_LABEL} printable characters, not {MAX_LABEL + 1}"):
        sets.check_evaluate("gt", "m", "x" * (MAX_LABEL + 1), "alice")
    with pytest.raises(UserError, match="not 3"):
        sets.check_evaluate("", "", "a\tb", "alice")
    with pytest.raises(UserError, match="model ' m'"):
        sets.check_evaluate("gt", " m", "", "alice")
    sets.record(sets.get("gt"), result("m", "v1.mp4"), "alice")  # alice scored m first: m is hers
    with pytest.raises(AccessDenied, match="scored by another caller"):
        sets.check_evaluate("gt", "m", "", "bob")
    assert sets.check_evaluate("gt2", "m", "", "bob").name == "gt2"  # per reference set


def test_settings_are_the_callers_else_the_sets_else_the_servers(sets):
    ref = sets.create("gt", "alice", RunSettings(quality="proxy", frame_stride=2), [GtVideo("a.mp4", 0)],
                      scorer(), 1)
    given = RunSettings(quality="proxy", frame_stride=3)
    assert sets.settings(ref, given) is given
    assert sets.settings(ref, None).frame_stride == 2 and sets.settings(ref, None).limits == Limits()
    assert sets.settings(None, None) is DEFAULT


def test_scores_against_a_set_and_the_leaderboard_of_its_models(sets):
    ref = a_set(sets)  # 2.0 everywhere
    exact = sets.record(ref, result("good", "v1.mp4", 2.0), "alice")
    assert exact.reference == "gt" and exact.row.final == 1.0 and exact.warnings == []
    assert exact.row.scores == {m: 1.0 for m in NAME_OF_KEY.values()}
    sets.record(ref, result("good", "v2.mp4", 2.0), "alice")
    half = sets.record(ref, result("off", "v1.mp4", 1.0), "bob")
    assert half.row.final == 0.5
    unnamed = sets.record(ref, result("", "v9.mp4", 2.0), "carol")  # no model: scored, not stored
    assert unnamed.row.model == "this video" and sets.store.model_owner("gt", "") is None
    with pytest.raises(ScoringError, match="profile"):  # scored unlike the GT: refused, not stored
        sets.record(ref, result("paper", "v1.mp4", provenance={**PROVENANCE, "profile": "paper"}), "bob")
    board = sets.leaderboard("gt")
    assert [(r.model, r.rank, r.final) for r in board.rows] == [("gt", None, 1.0), ("good", 1, 1.0), ("off", 2, 0.5)]
    assert board.gt_name == "gt" and board.rows[1].counts == {m: 2 for m in NAME_OF_KEY.values()}
    weighted = sets.leaderboard("gt", {"Lip sync": 0.0})
    assert weighted.weights["Lip sync"] == 0.0
    with pytest.raises(UserError, match="name the reference set"):
        sets.leaderboard("")
    with pytest.raises(NotFound, match="no GT reference set named 'nope'"):
        sets.leaderboard("nope")


def test_replacing_a_set_forgets_the_models_scored_against_the_old_one(sets):
    ref = a_set(sets)
    sets.record(ref, result("m", "v1.mp4"), "bob")
    a_set(sets, values={"a.mp4": 4.0, "b.mp4": 4.0})
    assert [r.model for r in sets.leaderboard("gt").rows] == ["gt"] and sets.get("gt").raw["Lip sync"] == 4.0
    assert sets.check_evaluate("gt", "m", "", "carol").name == "gt"  # m is no one's now
