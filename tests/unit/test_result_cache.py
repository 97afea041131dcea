"""The result cache (stores.result_cache) on a real SQLite file and a real PostgreSQL database: what
its key holds, that a stale or corrupt entry is never trusted, bounds, concurrent writers."""
import math
import multiprocessing
import sqlite3

import pytest

from theval_mesh.core.results import FAILED, VideoResult
from theval_mesh.pure.cache_key import cache_key
from theval_mesh.stores.result_cache import CORRUPT, HIT, MISS, STALE, ResultCache, location, open_cache

SETTINGS = {"profile": "reference", "quality": "proxy", "headpose": "auto", "frame_stride": 1,
            "single_pass": False, "normalise_translation": False}
PROVENANCE = {"tool": "theval-mesh 0.1.0", "profile": "reference",
              "landmarks": {"backend": "mediapipe-facemesh 0.10.14", "passes": ["lip", "brow"]},
              "vad": "silero-vad 5.1.2 model silero_vad.onnx sha256:2623a2953f6ff3d2",
              "quality": {"global_aesthetic": "laion-aes weights sha256:aaaa"},
              "served_by": {"quality": "in-process"}}
VIDEO = "a" * 64


def result(**kw) -> VideoResult:
    base = dict(model="m", video="/x/v.mp4", status="ok", metrics={"lip_dynamics": 0.25, "lip_sync": math.nan},
                nan_reasons={"lip_sync": "no speech"}, trace={"mouth_open": [0.1, math.nan, 0.3]},
                frames_total=3, frames_used=3, settings=dict(SETTINGS),
                provenance={**PROVENANCE, "frame_counts": {"decoded": 3}})
    return VideoResult(**{**base, **kw})


@pytest.fixture
def cache(store_location):
    c = ResultCache(store_location)
    yield c
    c.close()


def test_a_result_comes_back_whole_with_its_series(cache):
    assert cache.get(VIDEO, SETTINGS, PROVENANCE) == (MISS, None)
    assert cache.put(VIDEO, SETTINGS, PROVENANCE, result())
    outcome, got = cache.get(VIDEO, SETTINGS, PROVENANCE)
    assert outcome == HIT
    assert got.to_json() == result().to_json()  # NaN in metrics and series kept


@pytest.mark.parametrize("change", [
    lambda v, s, p: ("b" * 64, s, p),                                             # other bytes
    lambda v, s, p: (v, {**s, "frame_stride": 2}, p),                             # a setting
    lambda v, s, p: (v, s, {**p, "tool": "theval-mesh 0.2.0"}),                   # the tool version
    lambda v, s, p: (v, s, {**p, "quality": {"global_aesthetic": "laion-aes weights sha256:bbbb"}}),
    lambda v, s, p: (v, s, {**p, "landmarks": {**p["landmarks"], "passes": ["lip"]}}),  # FaceMesh passes
    lambda v, s, p: (v, s, {**p, "vad": "silero-vad 4.0 model silero_vad.jit sha256:ffff"}),
], ids=["video", "settings", "version", "weights", "passes", "vad"])
def test_any_part_of_the_key_changed_misses(cache, change):
    cache.put(VIDEO, SETTINGS, PROVENANCE, result())
    video, settings, provenance = change(VIDEO, SETTINGS, PROVENANCE)
    assert cache.get(video, settings, provenance) == (MISS, None)
    assert cache.get(VIDEO, SETTINGS, PROVENANCE)[0] == HIT


def test_where_the_models_ran_is_not_part_of_the_key(cache):
    cache.put(VIDEO, SETTINGS, PROVENANCE, result())
    triton = {**PROVENANCE, "served_by": {"quality": "triton 127.0.0.1:8001"}}
    assert cache.get(VIDEO, SETTINGS, triton)[0] == HIT


def test_failed_results_and_results_of_other_settings_are_not_kept(cache):
    assert not cache.put(VIDEO, SETTINGS, PROVENANCE, result(status=FAILED, reason="no face"))
    assert not cache.put(VIDEO, SETTINGS, PROVENANCE, result(settings={**SETTINGS, "quality": "paper"}))
    assert not cache.put(VIDEO, SETTINGS, {**PROVENANCE, "vad": "other"}, result())
    assert cache.status()["entries"] == 0


def _tamper(location: str, sql: str, args=()):
    if location.startswith("postgresql://"):
        import psycopg
        with psycopg.connect(location, autocommit=True) as db:
            db.execute(sql.replace("?", "%s"), args)
    else:
        db = sqlite3.connect(location)
        db.execute(sql, args)
        db.commit()
        db.close()


def test_a_corrupt_entry_is_deleted_and_scored_again(cache, store_location):
    cache.put(VIDEO, SETTINGS, PROVENANCE, result())
    _tamper(store_location, "UPDATE result_cache SET result = replace(result, '0.25', '0.75')")
    assert cache.get(VIDEO, SETTINGS, PROVENANCE) == (CORRUPT, None)
    assert cache.status()["entries"] == 0
    assert cache.get(VIDEO, SETTINGS, PROVENANCE) == (MISS, None)


def test_an_entry_whose_content_disagrees_with_its_key_is_stale(cache, store_location):
    """A sound entry (its digest matches) that holds another run's result: never served."""
    import hashlib
    other = result(settings={**SETTINGS, "single_pass": True}).to_json()
    key = cache_key(VIDEO, SETTINGS, PROVENANCE)
    _tamper(store_location, "INSERT INTO result_cache (key, video_sha256, result, digest, bytes, created, used) "
            "VALUES (?, ?, ?, ?, ?, 0, 0)", (key, VIDEO, other, hashlib.sha256(other.encode()).hexdigest(), len(other)))
    assert cache.get(VIDEO, SETTINGS, PROVENANCE) == (STALE, None)
    assert cache.status()["entries"] == 0


def test_past_its_bound_the_least_recently_used_go(tmp_path):
    cache = ResultCache(str(tmp_path / "c.sqlite"), max_bytes=10 * len(result().to_json()))
    for i in range(12):
        cache.put(f"{i:064d}", SETTINGS, PROVENANCE, result())
    assert cache.get(f"{0:064d}", SETTINGS, PROVENANCE)[0] == HIT  # used now: the newest
    assert cache.trim() > 0
    assert cache.status()["bytes"] <= cache.max_bytes
    assert cache.get(f"{0:064d}", SETTINGS, PROVENANCE)[0] == HIT
    assert cache.get(f"{1:064d}", SETTINGS, PROVENANCE)[0] == MISS
    assert cache.clear() > 0 and cache.status()["entries"] == 0
    cache.close()


def _writer(where: str, worker: int) -> int:
    cache = ResultCache(where)
    try:
        kept = 0
        for i in range(15):
            # every writer writes keys 0-4 (the same results) and 10 keys of its own
            video = f"{i:064d}" if i < 5 else f"{worker}{i:063d}"
            kept += cache.put(video, SETTINGS, PROVENANCE, result(video=f"/w{worker}/{i}.mp4"))
        return kept
    finally:
        cache.close()


def test_concurrent_writers_lose_nothing(store_location):
    ResultCache(store_location).close()  # made (and migrated) once, as a run's first open would
    with multiprocessing.get_context("fork").Pool(4) as pool:
        kept = pool.starmap(_writer, [(store_location, w) for w in range(1, 5)])
    assert kept == [15] * 4
    cache = ResultCache(store_location)
    assert cache.status()["entries"] == 5 + 4 * 10
    for w in range(1, 5):
        for i in range(15):
            video = f"{i:064d}" if i < 5 else f"{w}{i:063d}"
            assert cache.get(video, SETTINGS, PROVENANCE)[0] == HIT
    cache.close()


def test_a_cache_that_cannot_be_read_is_left_out_with_a_warning(tmp_path):
    bad = tmp_path / "c.sqlite"
    bad.write_bytes(b"not a database" * 100)
    said = []
    assert open_cache(str(bad), warn=said.append) is None
    assert "result cache not used" in said[0] and str(bad) in said[0] and "--no-cache" in said[0]


def test_where_the_cache_is(monkeypatch, tmp_path):
    monkeypatch.setenv("THEVAL_CACHE", "off")
    assert location(True) is None and location(False) is None
    assert location(str(tmp_path / "c.sqlite")) == str(tmp_path / "c.sqlite")
    monkeypatch.delenv("THEVAL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert location(True) == str(tmp_path / "theval" / "results-cache.sqlite")
    assert location(False) is None


@pytest.mark.parametrize("options", [{}, {"profile": "paper"}, {"single_pass": True, "frame_stride": 2}])
def test_the_key_made_before_any_model_loads_is_the_engines_provenance(options):
    """core.provenance.expected (no torch, no MediaPipe) gives what the engine's results carry."""
    from theval_mesh.core.engine import Engine
    from theval_mesh.core.provenance import expected
    from theval_mesh.pure.settings import RunSettings
    settings = RunSettings(quality="proxy", **options)
    assert expected(settings) == Engine(settings).provenance()


def test_fuzzed_entries_are_never_served_unless_sound(tmp_path):
    """Seeded mutations of a stored result (bytes flipped, cut, spliced), stored with a matching
    digest so that only parsing and the key checks stand between them and a run: get() never
    raises, and what it serves parses and carries the settings and backends it is keyed by."""
    import hashlib

    import numpy as np

    from tests.support.media_fuzz import mutate
    where = str(tmp_path / "c.sqlite")
    cache = ResultCache(where)
    good = result().to_json().encode()
    key = cache_key(VIDEO, SETTINGS, PROVENANCE)
    rng = np.random.default_rng(23)
    outcomes = {}
    for _ in range(300):
        text = mutate(rng, good).decode("utf-8", errors="replace")
        _tamper(where, "INSERT INTO result_cache (key, video_sha256, result, digest, bytes, created, used) "
                "VALUES (?, ?, ?, ?, ?, 0, 0) ON CONFLICT (key) DO UPDATE SET result = excluded.result, "
                "digest = excluded.digest", (key, VIDEO, text, hashlib.sha256(text.encode()).hexdigest(), len(text)))
        outcome, got = cache.get(VIDEO, SETTINGS, PROVENANCE)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if got is not None:
            assert outcome == HIT and got.settings == SETTINGS and got.status != FAILED
            assert isinstance(got.metrics, dict) and all(isinstance(v, float) for v in got.metrics.values())
    assert outcomes.get(CORRUPT, 0) > 100  # most mutants do not parse
    cache.close()


def test_a_cache_that_fails_mid_run_is_a_miss_said_once_and_never_fails_the_run(tmp_path):
    said = []
    cache = ResultCache(str(tmp_path / "c.sqlite"), warn=said.append)
    assert cache.keep(VIDEO, SETTINGS, PROVENANCE, result())
    cache.db.close()  # the database goes away under the run (as a full disk or a lost server would)
    assert cache.lookup(VIDEO, SETTINGS, PROVENANCE) == (MISS, None)
    assert not cache.keep(VIDEO, SETTINGS, PROVENANCE, result())
    assert len(said) == 1 and "left out for the rest of this run" in said[0] and str(tmp_path) in said[0]
