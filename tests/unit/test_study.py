"""The pure parts of `theval study`: pairing by name, the seeded order and sides, byte ranges, and
the store's rows and CSV export (the integration test drives the page in chromium)."""
import io
from collections import Counter

import pytest

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.study_plan import Pair, candidates, plan_pairs
from theval_mesh.stores.study_store import EXPORT_COLUMNS, StudyStore
from theval_mesh.studies.study_server import byte_range, model_folders, videos_by_name

VIDEOS = {
    "a": {"x": "x.mp4", "y": "y.mp4", "only_a": "only_a.mp4"},
    "b": {"x": "x.webm", "y": "y.webm"},
    "c": {"y": "sub/y.mp4"},
}


def test_videos_are_paired_by_name_across_every_two_models():
    assert candidates(VIDEOS) == [("a", "x.mp4", "b", "x.webm"), ("a", "y.mp4", "b", "y.webm"),
                                  ("a", "y.mp4", "c", "sub/y.mp4"), ("b", "y.webm", "c", "sub/y.mp4")]


def test_the_order_and_sides_are_seeded_by_the_study():
    sid, pairs = plan_pairs(VIDEOS, seed=0)
    assert plan_pairs(VIDEOS, seed=0) == (sid, pairs)  # reproducible
    assert [p.index for p in pairs] == [0, 1, 2, 3]
    shown = {tuple(sorted([(p.left_model, p.left_video), (p.right_model, p.right_video)])) for p in pairs}
    assert shown == {tuple(sorted([(a, va), (b, vb)])) for a, va, b, vb in candidates(VIDEOS)}
    others = [plan_pairs(VIDEOS, seed=s) for s in range(1, 20)]
    assert len({o[0] for o in others} | {sid}) == 20  # another seed: another study
    assert any(o[1] != [Pair(i, *c) for i, c in enumerate(candidates(VIDEOS))] for o in others)


def test_sides_are_random_not_by_model():
    videos = {m: {f"v{i}": f"v{i}.mp4" for i in range(200)} for m in ("a", "b")}
    _, pairs = plan_pairs(videos, seed=3)
    left = Counter(p.left_model for p in pairs)
    assert 70 < left["a"] < 130
    assert [p.model("left") for p in pairs] == [p.left_model for p in pairs]


def test_a_limit_keeps_that_many_pairs_and_is_another_study():
    sid, pairs = plan_pairs(VIDEOS, seed=0, limit=2)
    assert len(pairs) == 2 and sid != plan_pairs(VIDEOS, seed=0)[0]


def test_a_folder_is_listed_by_name_without_suffix(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("one.mp4", "sub/two.webm", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    assert videos_by_name(tmp_path) == {"one": "one.mp4", "sub/two": "sub/two.webm"}
    (tmp_path / "one.mov").write_bytes(b"x")
    with pytest.raises(UserError, match="two videos named 'one'"):
        videos_by_name(tmp_path)


@pytest.mark.parametrize("header, expected", [
    (None, None), ("bytes=0-", (0, 99)), ("bytes=10-19", (10, 19)), ("bytes=90-500", (90, 99)),
    ("bytes=-10", (90, 99)), ("bytes=-500", (0, 99)), ("bytes=100-", "unsatisfiable"),
    ("bytes=-0", "unsatisfiable"), ("bytes=5-2", "unsatisfiable"), ("bytes=0-1,5-6", None), ("items=0-1", None),
    ("bytes=-", None), ("bytes=a-b", None),
])
def test_byte_ranges(header, expected):
    assert byte_range(header, 100) == expected


def test_the_store_keeps_one_row_per_pair_and_the_first_answer(tmp_path):
    store = StudyStore(tmp_path / "s" / "study.sqlite")
    pair = Pair(0, "b", "x.webm", "a", "x.mp4")
    assert not store.answer("s1", "ann", pair, "left")  # not shown yet
    store.show("s1", "ann", pair)
    store.show("s1", "ann", pair)  # a reload
    assert store.answer("s1", "ann", pair, "left")
    assert not store.answer("s1", "ann", pair, "right")  # a double click: the first answer stands
    assert store.answered("s1", "ann") == {0} and store.answered("s1", "bob") == set()
    store.show("s1", "ann", Pair(1, "a", "y.mp4", "b", "y.webm"))  # shown, not answered: not exported
    out = io.StringIO()
    assert store.export_csv(out) == 1
    assert out.getvalue().splitlines() == [",".join(EXPORT_COLUMNS), "b,a,b,x.webm,x.mp4,ann"]
    store.close()


def test_export_refuses_a_missing_store(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        StudyStore(tmp_path / "none.sqlite", create=False)
    assert not (tmp_path / "none.sqlite").exists()


def test_models_are_folders_named_after_themselves_or_named(tmp_path):
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
    assert model_folders([str(tmp_path / "x"), f"other={tmp_path / 'y'}"]) == {"x": tmp_path / "x",
                                                                                 "other": tmp_path / "y"}
    for bad, message in (([str(tmp_path / "x")], "at least two"), ([str(tmp_path / "x")] * 2, "given twice"),
                         ([str(tmp_path / "x"), str(tmp_path / "z")], "no such folder")):
        with pytest.raises(UserError, match=message):
            model_folders(bad)
