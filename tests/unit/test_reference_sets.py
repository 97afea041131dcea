"""GT reference sets in plain Python (evaluator.reference_sets; real SQLite and PostgreSQL, real
folders): which videos a GT set is made of, each owner's namespace of sets (who may create,
replace, score against and read one; what an admin may read), what a set refuses, and the
leaderboard of the models scored against one. Videos are scored by a function of the
test (the evaluator passes the mesh's), returning results with known metric values."""
import math
import os
import shutil

import pytest

from theval_mesh.core.results import FAILED, OK, VideoResult
from theval_mesh.evaluator.reference_sets import MAX_LABEL, GtVideo, ReferenceSets
from theval_mesh.pure.errors import AccessDenied, AlreadyExists, NotFound, ServiceError, UserError, VideoError
from theval_mesh.pure.limits import Limits
from theval_mesh.pure.scoring.errors import ScoringError
from theval_mesh.pure.scoring.names import KEYS, NAME_OF_KEY
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.reference_store import ReferenceStore

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
    assert got == [GtVideo(str(p), 0, str(p), str(p)) for p in expected]


def test_files_and_bytes_stand_for_themselves_and_an_empty_folder_for_nothing(sets, roots):
    clip, listed = touch(roots / "clip.mp4"), touch(roots / "list.txt")
    (roots / "empty").mkdir()
    uri = f"file://{clip}"
    got = sets.gt_videos([None, uri, str(roots / "empty"), str(listed), str(roots / "missing.mp4")])
    # as given: their labels are the URIs the caller gave; a .txt is a file here, not a list
    assert got == [GtVideo("<video bytes> #0", 0), GtVideo(uri, 1, local=str(clip)),
                   GtVideo(str(listed), 3, local=str(listed)),
                   GtVideo(str(roots / "missing.mp4"), 4, local=str(roots / "missing.mp4"))]


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
    stored = sets.get("alice", "gt")
    assert (stored.raw, stored.failures, stored.settings) == (ref.raw, ref.failures, DEFAULT.key())
    assert [r.video for r in sets.store.reference_videos("alice", "gt")] == ["a.mp4", "b.mp4", "bad.mp4"]


def test_a_set_that_cannot_normalise_is_refused_and_not_stored(sets):
    with pytest.raises(UserError, match="no video of the GT set could be scored; first failure: a.mp4: cannot"):
        a_set(sets, failed=("a.mp4", "b.mp4"))
    with pytest.raises(UserError, match=r"cannot normalise Lip sync \(zero or NaN over all its videos: Lip sync: "
                                        r"no speech\); add videos"):
        a_set(sets, nan=("lip_sync", "no speech"))
    with pytest.raises(UserError, match=r"cannot normalise Global aesthetic, .*, Lip sync \(zero or NaN over all "
                                        r"its videos\); add"):  # zero everywhere, no reason recorded
        a_set(sets, values={"a.mp4": 0.0, "b.mp4": 0.0})
    assert sets.store.all(None) == []


def test_a_set_the_headers_show_cannot_normalise_is_refused_before_scoring(sets, roots, clip_writer):
    """No GT video with an audio track: FAILED_PRECONDITION (InputsRefused) before any video is
    scored; one video with a track is enough. The cannot-normalise refusal after scoring is a
    ScoringError (FAILED_PRECONDITION too)."""
    from theval_mesh.pure.errors import InputsRefused
    from theval_mesh.pure.scoring.errors import ScoringError
    from theval_mesh.rpc.status import status_of
    def write_clip(path, **kw):  # written where the server may read
        return str(shutil.move(clip_writer(path.name, **kw), path))
    silent = [write_clip(roots / f"silent{k}.mp4") for k in range(2)]
    scored = []

    def score(video):
        scored.append(video.label)
        return result("gt", video.label), None
    with pytest.raises(InputsRefused, match="none of the 2 readable gt video.s. has an audio track") as refused:
        sets.create("gt", "alice", DEFAULT, sets.gt_videos(silent), score, 2)
    assert scored == [] and status_of(refused.value)[0].name == "FAILED_PRECONDITION"
    voiced = write_clip(roots / "voiced.mp4", tone=[0.3])
    sets.create("gt", "alice", DEFAULT, sets.gt_videos(silent + [voiced]), score, 2)
    assert len(scored) == 3
    with pytest.raises(ScoringError, match="cannot normalise Lip sync") as after:
        a_set(sets, name="other", nan=("lip_sync", "no speech"))
    assert status_of(after.value)[0].name == "FAILED_PRECONDITION"


def test_a_mesh_failure_fails_the_whole_set(sets):
    def score(video):
        if video.label == "b.mp4":
            return result("gt", "b.mp4", status=FAILED), ServiceError("UNAVAILABLE", "the landmarks service is down")
        return result("gt", video.label), None
    with pytest.raises(ServiceError, match="landmarks service is down"):
        sets.create("gt", "alice", DEFAULT, [GtVideo("a.mp4", 0), GtVideo("b.mp4", 1)], score, 2)
    assert sets.store.all(None) == []


def test_a_set_is_replaced_only_when_asked(sets):
    assert sets.check_create("gt", "alice", replace=False) == "gt"
    a_set(sets)
    with pytest.raises(AlreadyExists, match="you have a reference set named 'gt'; set replace to score it again"):
        sets.check_create("gt", "alice", replace=False)
    assert sets.check_create("gt", "alice", replace=True) == "gt"
    with pytest.raises(UserError, match="reference set name 'bad\\\\nname'"):
        sets.check_create("bad\nname", "alice", replace=False)


# ---------------------------------------------------------------------------- owners
def test_each_owner_has_its_own_names_sets_and_models(sets):
    """Two teams both have a set named gt, and both score a model named m against theirs."""
    alices = a_set(sets)  # 2.0 everywhere
    assert sets.check_create("gt", "bob", replace=False) == "gt"  # alice's gt takes no name of bob's
    bobs = a_set(sets, owner="bob", values={"a.mp4": 4.0, "b.mp4": 4.0})
    assert (sets.get("alice", "gt").raw["Lip sync"], sets.get("bob", "gt").raw["Lip sync"]) == (2.0, 4.0)
    assert sets.get("bob", "gt").owner == "bob" and [r.owner for r in sets.store.all(None)] == ["alice", "bob"]
    sets.record(sets.check_evaluate("gt", "m", "", "alice"), result("m", "v1.mp4", 2.0))
    sets.record(sets.check_evaluate("gt", "m", "", "bob"), result("m", "v1.mp4", 2.0))  # the same model name
    assert [(r.model, r.final) for r in sets.leaderboard("alice", "gt").rows] == [("gt", 1.0), ("m", 1.0)]
    assert [(r.model, r.final) for r in sets.leaderboard("bob", "gt").rows] == [("gt", 1.0), ("m", 0.5)]
    a_set(sets, values={"a.mp4": 3.0, "b.mp4": 3.0})  # alice replaces hers: bob's set and rows stay
    assert [r.model for r in sets.leaderboard("alice", "gt").rows] == ["gt"]
    assert [r.model for r in sets.leaderboard("bob", "gt").rows] == ["gt", "m"]
    assert sets.get("bob", "gt").raw == bobs.raw and sets.get("alice", "gt").raw != alices.raw
    assert [r.video for r in sets.store.reference_videos("bob", "gt")] == ["a.mp4", "b.mp4"]


def test_another_owners_set_is_not_found_as_one_that_does_not_exist(sets):
    """bob probes alice's set: he gets what he got before she made it, and no name of hers."""
    def refusals(who):
        out = []
        for call in (lambda: sets.check_evaluate("alice-gt", "hallo2", "", who),
                     lambda: sets.leaderboard(who, "alice-gt")):
            with pytest.raises(NotFound) as err:
                call()
            out.append(str(err.value))
        return out
    before = refusals("bob"), refusals("")  # "": the anonymous caller of a server without tokens
    a_set(sets, name="alice-gt")
    a_set(sets, name="alice-gt2")
    assert (refusals("bob"), refusals("")) == before
    assert before[0][0] == "no GT reference set named 'alice-gt' of owner 'bob': ListReferences lists yours, " \
                           "CreateReference makes one"
    assert before[1][0].startswith("no GT reference set named 'alice-gt': ListReferences")
    assert sets.listed("bob", admin=False, every_owner=False) == []
    # alice's set, and the model name hallo2 on it, are still hers to use
    sets.record(sets.check_evaluate("alice-gt", "hallo2", "", "alice"), result("hallo2", "v1.mp4"))
    assert [r.model for r in sets.leaderboard("alice", "alice-gt").rows] == ["alice-gt", "hallo2"]
    assert [r.name for r in sets.listed("alice", admin=False, every_owner=False)] == ["alice-gt", "alice-gt2"]


def test_an_admin_lists_and_reads_every_owners_sets_and_no_one_else_does(sets):
    a_set(sets, name="gt")
    a_set(sets, name="gt", owner="bob")
    a_set(sets, name="mine", owner="ops")
    assert [r.name for r in sets.listed("ops", admin=True, every_owner=False)] == ["mine"]  # its own by default
    assert [(r.owner, r.name) for r in sets.listed("ops", admin=True, every_owner=True)] == \
        [("alice", "gt"), ("bob", "gt"), ("ops", "mine")]
    assert sets.owner_read("ops", True, "bob") == "bob" and sets.leaderboard("bob", "gt").gt_name == "gt"
    assert sets.owner_read("alice", False, None) == sets.owner_read("alice", False, "alice") == "alice"
    for call in (lambda: sets.listed("alice", admin=False, every_owner=True),
                 lambda: sets.owner_read("alice", False, "bob"),  # bob has a gt
                 lambda: sets.owner_read("alice", False, "nobody")):  # nobody has none: the same answer
        with pytest.raises(AccessDenied, match="only an admin reads other owners' reference sets .*--admins"):
            call()
    with pytest.raises(NotFound, match="no GT reference set named 'gt' of owner 'nobody'"):
        sets.leaderboard(sets.owner_read("ops", True, "nobody"), "gt")


# ---------------------------------------------------------------------------- scoring against a set
def test_the_rules_of_a_video_scored_against_a_set(sets):
    assert sets.check_evaluate("", "", "", "alice") is None  # raw metrics only
    with pytest.raises(NotFound, match=r"no GT reference set named 'gt' of owner 'alice': ListReferences lists"):
        sets.check_evaluate("gt", "m", "", "alice")
    a_set(sets)
    a_set(sets, name="gt2")
    with pytest.raises(NotFound, match=r"no GT reference set named 'nope' of owner 'alice'") as err:
        sets.check_evaluate("nope", "m", "", "alice")
    assert "gt2" not in str(err.value)  # no names listed, not even the caller's own
    assert sets.check_evaluate("gt", "m", "clip one", "alice").name == "gt"
    with pytest.raises(UserError, match="has the name of the reference set"):
        sets.check_evaluate("gt", "gt", "", "alice")
    with pytest.raises(UserError, match=f"name: at most {MAX_LABEL} printable characters, not {MAX_LABEL + 1}"):
        sets.check_evaluate("gt", "m", "x" * (MAX_LABEL + 1), "alice")
    with pytest.raises(UserError, match="not 3"):
        sets.check_evaluate("", "", "a\tb", "alice")
    with pytest.raises(UserError, match="model ' m'"):
        sets.check_evaluate("gt", " m", "", "alice")
    with pytest.raises(NotFound, match=r"no GT reference set named 'x{128}' of"):  # a long name is cut
        sets.check_evaluate("x" * 5000, "m", "", "alice")


def test_settings_are_the_callers_else_the_sets_else_the_servers(sets):
    ref = sets.create("gt", "alice", RunSettings(quality="proxy", frame_stride=2), [GtVideo("a.mp4", 0)],
                      scorer(), 1)
    given = RunSettings(quality="proxy", frame_stride=3)
    assert sets.settings(ref, given) is given
    assert sets.settings(ref, None).frame_stride == 2 and sets.settings(ref, None).limits == Limits()
    assert sets.settings(None, None) is DEFAULT


def test_scores_against_a_set_and_the_leaderboard_of_its_models(sets):
    ref = a_set(sets)  # 2.0 everywhere
    exact = sets.record(ref, result("good", "v1.mp4", 2.0))
    assert exact.reference == "gt" and exact.row.final == 1.0 and exact.warnings == []
    assert exact.row.scores == {m: 1.0 for m in NAME_OF_KEY.values()}
    sets.record(ref, result("good", "v2.mp4", 2.0))
    half = sets.record(ref, result("off", "v1.mp4", 1.0))
    assert half.row.final == 0.5
    unnamed = sets.record(ref, result("", "v9.mp4", 2.0))  # no model: scored, not stored
    assert unnamed.row.model == "this video" and "" not in {r.model for r in sets.store.scored("alice", "gt")}
    with pytest.raises(ScoringError, match="profile"):  # scored unlike the GT: refused, not stored
        sets.record(ref, result("paper", "v1.mp4", provenance={**PROVENANCE, "profile": "paper"}))
    board = sets.leaderboard("alice", "gt")
    assert [(r.model, r.rank, r.final) for r in board.rows] == [("gt", None, 1.0), ("good", 1, 1.0), ("off", 2, 0.5)]
    assert board.gt_name == "gt" and board.rows[1].counts == {m: 2 for m in NAME_OF_KEY.values()}
    weighted = sets.leaderboard("alice", "gt", {"Lip sync": 0.0})
    assert weighted.weights["Lip sync"] == 0.0
    with pytest.raises(UserError, match="name the reference set"):
        sets.leaderboard("alice", "")
    with pytest.raises(NotFound, match="no GT reference set named 'nope'"):
        sets.leaderboard("alice", "nope")


def test_replacing_a_set_forgets_the_models_scored_against_the_old_one(sets):
    ref = a_set(sets)
    sets.record(ref, result("m", "v1.mp4"))
    a_set(sets, values={"a.mp4": 4.0, "b.mp4": 4.0})
    assert [r.model for r in sets.leaderboard("alice", "gt").rows] == ["gt"]
    assert sets.get("alice", "gt").raw["Lip sync"] == 4.0


def test_a_jobs_gt_takes_the_results_a_set_holds_for_the_same_bytes_settings_and_backends(sets, roots):
    from theval_mesh.backends.checksum import sha256_file
    a, b = touch(roots / "gt" / "a.mp4"), touch(roots / "gt" / "b.mp4")
    b.write_bytes(b"y")
    videos = [GtVideo(str(p), i, str(p), str(p)) for i, p in enumerate((a, b))]
    sets.create("gt", "alice", DEFAULT, videos, scorer("gt"), 2, {str(a): sha256_file(a), str(b): sha256_file(b)})
    taken = sets.gt_results("alice", DEFAULT, PROVENANCE, "GT", [str(a), str(b)])
    assert [(r.model, r.video, r.reused) for r in taken] == [("GT", str(a), True), ("GT", str(b), True)]
    b.write_bytes(b"z")  # changed since: scored again
    assert [r.video for r in sets.gt_results("alice", DEFAULT, PROVENANCE, "GT", [str(a), str(b)])] == [str(a)]
    for owner, settings, provenance in (("bob", DEFAULT, PROVENANCE),  # another owner's sets are not the caller's
                                        ("alice", RunSettings(quality="proxy", frame_stride=2), PROVENANCE),
                                        ("alice", DEFAULT, PROVENANCE | {"landmarks": "mediapipe==0.10.22"})):
        assert sets.gt_results(owner, settings, provenance, "GT", [str(a)]) == []
