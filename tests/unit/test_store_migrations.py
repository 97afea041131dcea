"""Store files written before per-schema migrations (real SQLite files), and reference stores
written before owners had namespaces (SQLite and PostgreSQL), open, migrate once and keep their
rows; newer schemas are refused; a migration that fails changes nothing."""
import json
import multiprocessing as mp
import sqlite3

import pytest

from theval_mesh.core.inputs import Item
from theval_mesh.core.results import OK, VideoResult
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.database import open_database
from theval_mesh.stores.job_store import MIGRATIONS as JOB_MIGRATIONS
from theval_mesh.stores.job_store import JobSpec, SqlJobStore
from theval_mesh.stores.reference_store import MIGRATIONS, Reference, ReferenceStore
from theval_mesh.stores.sqlite import SqliteDatabase as Database

SETTINGS = RunSettings(quality="proxy").key()
KEY = json.dumps(SETTINGS, sort_keys=True)

# The schemas as the stores wrote them before the migrations were kept per schema (copied from
# that code: it changes, these files do not). The job store also set PRAGMA user_version = 1.
OLD_JOBS = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, created REAL NOT NULL, spec TEXT NOT NULL, settings_key TEXT NOT NULL, total INTEGER NOT NULL, state TEXT NOT NULL, error TEXT,
    cancel INTEGER NOT NULL DEFAULT 0, driver TEXT, heartbeat REAL, started REAL, finished REAL);
CREATE TABLE IF NOT EXISTS items (
    job TEXT NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, missing TEXT,
    PRIMARY KEY (job, seq), UNIQUE (job, model, video));
CREATE TABLE IF NOT EXISTS results (
    settings_key TEXT NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, status TEXT NOT NULL,
    result TEXT NOT NULL, committed REAL NOT NULL, PRIMARY KEY (settings_key, model, video));
CREATE INDEX IF NOT EXISTS results_time ON results (settings_key, committed);
"""
OLD_REFERENCES = """
CREATE TABLE IF NOT EXISTS reference_sets (
    name TEXT PRIMARY KEY, created REAL NOT NULL, settings TEXT NOT NULL, provenance TEXT NOT NULL,
    raw TEXT NOT NULL, counts TEXT NOT NULL, videos INTEGER NOT NULL, scored INTEGER NOT NULL,
    failures TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reference_videos (
    reference TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL, PRIMARY KEY (reference, video));
CREATE TABLE IF NOT EXISTS scored_videos (
    reference TEXT NOT NULL, model TEXT NOT NULL, video TEXT NOT NULL, result TEXT NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (reference, model, video));
"""
OWNERS = """
ALTER TABLE reference_sets ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE scored_videos ADD COLUMN owner TEXT NOT NULL DEFAULT '';
"""


def result(model, video, value=1.0):
    return VideoResult(model, video, OK, metrics={"lip_sync": value}, settings=SETTINGS)


def an_old_store(path, owners: bool):
    """The evaluator's store file as the old code left it: a job with one committed result, a
    reference set with its video, a model's video scored against it (if `owners`: the set is
    alice's, the model was scored by bob, as a model's first scorer then owned it)."""
    with sqlite3.connect(path) as db:
        db.executescript(OLD_JOBS + OLD_REFERENCES + (OWNERS if owners else ""))
        db.execute("PRAGMA user_version = 1")
        spec = JobSpec(inputs=[["GT", "/v/gt"]], settings=SETTINGS, owner="alice")
        db.execute("INSERT INTO jobs (id, created, spec, settings_key, total, state) VALUES (?,?,?,?,?,?)",
                   ("job-old", 1.0, json.dumps(spec.__dict__), KEY, 2, "done"))
        for seq, video in enumerate(("/v/gt/a.mp4", "/v/gt/b.mp4")):
            db.execute("INSERT INTO items (job, seq, model, video) VALUES (?,?,?,?)", ("job-old", seq, "GT", video))
        db.execute("INSERT INTO results VALUES (?,?,?,?,?,?)",
                   (KEY, "GT", "/v/gt/a.mp4", OK, result("GT", "/v/gt/a.mp4").to_json(), 2.0))
        db.execute(f"INSERT INTO reference_sets VALUES (?,?,?,?,?,?,?,?,?{',?' if owners else ''})",
                   ("gt", 3.0, json.dumps(SETTINGS), "{}", json.dumps({"Lip sync": 1.0}), json.dumps({"Lip sync": 1}),
                    1, 1, "[]") + (("alice",) if owners else ()))
        db.execute("INSERT INTO reference_videos VALUES (?,?,?)", ("gt", "/v/gt/a.mp4",
                                                                   result("gt", "/v/gt/a.mp4").to_json()))
        db.execute(f"INSERT INTO scored_videos VALUES (?,?,?,?,?{',?' if owners else ''})",
                   ("gt", "m", "/v/m/a.mp4", result("m", "/v/m/a.mp4", 0.5).to_json(), 4.0) +
                   (("bob",) if owners else ()))
    db.close()


def versions(path) -> dict:
    with sqlite3.connect(path) as db:
        out = dict(db.execute("SELECT name, version FROM schema_versions"))
        out["user_version"] = db.execute("PRAGMA user_version").fetchone()[0]
    db.close()
    return out


@pytest.mark.parametrize("owners", [True, False], ids=["with-owners", "before-owners"])
def test_an_old_store_opens_migrates_and_keeps_its_rows(tmp_path, owners):
    path = tmp_path / "store.sqlite"
    an_old_store(path, owners)
    jobs, refs = SqlJobStore(path), ReferenceStore(path)  # as the evaluator opens it
    job = jobs.get("job-old")
    assert (job.state, job.total, job.done, job.spec.owner) == ("done", 2, 1, "alice")
    assert [r.video for r in jobs.results("job-old")] == ["/v/gt/a.mp4"]
    assert [i.video for _, i in jobs.pending("job-old")] == ["/v/gt/b.mp4"]
    owner = "alice" if owners else ""  # a set made before owners is the anonymous caller's
    ref = refs.get(owner, "gt")
    assert (ref.raw, ref.counts, ref.videos, ref.owner) == ({"Lip sync": 1.0}, {"Lip sync": 1}, 1, owner)
    assert [r.video for r in refs.reference_videos(owner, "gt")] == ["/v/gt/a.mp4"]
    # bob's model against alice's set: a row of her set now, on her leaderboard
    assert [(r.model, r.metrics["lip_sync"]) for r in refs.scored(owner, "gt")] == [("m", 0.5)]
    assert refs.scored("bob", "gt") == [] and refs.get("bob", "gt") is None
    assert versions(path) == {"jobs": len(JOB_MIGRATIONS), "references": len(MIGRATIONS), "user_version": 1}
    # ... and goes on working: new rows beside the old ones
    new = jobs.create(JobSpec(inputs=[["m", "/v/m"]], settings=SETTINGS), [Item("m", "/v/m/a.mp4")])
    assert jobs.commit(new.id, result("m", "/v/m/a.mp4")) and jobs.get(new.id).done == 1
    refs.add_scored(owner, "gt", result("n", "/v/n/a.mp4"))
    assert [r.model for r in refs.scored(owner, "gt")] == ["m", "n"]
    refs.put(Reference("gt", SETTINGS, {}, {"Lip sync": 2.0}, {"Lip sync": 1}, 1, 1, owner="bob"), [])
    assert [(r.owner, r.name) for r in refs.all(None)] == sorted([(owner, "gt"), ("bob", "gt")])
    assert refs.get(owner, "gt").raw == {"Lip sync": 1.0} and len(refs.scored(owner, "gt")) == 2
    jobs.close()
    refs.close()
    again = ReferenceStore(path)  # migrated once: reopening changes nothing
    assert again.get(owner, "gt").owner == owner and versions(path)["references"] == len(MIGRATIONS)
    again.close()


def test_a_store_of_owners_without_namespaces_migrates_on_both_databases(store_location):
    """A reference store as version 3 left it (one namespace; a model owned by its first scorer),
    in SQLite or PostgreSQL: each set goes to its owner's namespace with its videos, and every
    model scored against it (whoever scored it) to the set's owner."""
    old = open_database(store_location, "store", "references", MIGRATIONS[:3])  # what version 3 ran
    with old.transaction() as db:
        for owner, name in (("alice", "alice-gt"), ("bob", "bob-gt"), ("", "before-owners")):
            db.execute("INSERT INTO reference_sets VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (name, 1.0, json.dumps(SETTINGS), "{}", json.dumps({"Lip sync": 1.0}), "{}", 1, 1, "[]", owner))
            db.execute("INSERT INTO reference_videos VALUES (?,?,?)",
                       (name, "/gt.mp4", result(name, "/gt.mp4").to_json()))
        for reference, model, scorer in (("alice-gt", "hallo2", "bob"), ("alice-gt", "mine", "alice"),
                                         ("bob-gt", "hallo2", "bob"), ("before-owners", "m", "")):
            db.execute("INSERT INTO scored_videos VALUES (?,?,?,?,?,?)",
                       (reference, model, "/v.mp4", result(model, "/v.mp4").to_json(), 2.0, scorer))
    old.close()
    refs = ReferenceStore(store_location)
    assert [(r.owner, r.name) for r in refs.all(None)] == [("", "before-owners"), ("alice", "alice-gt"),
                                                          ("bob", "bob-gt")]
    assert [r.model for r in refs.scored("alice", "alice-gt")] == ["hallo2", "mine"]  # bob's hallo2 too
    assert [r.model for r in refs.scored("bob", "bob-gt")] == ["hallo2"]
    assert [r.model for r in refs.scored("", "before-owners")] == ["m"]
    assert [r.video for r in refs.reference_videos("alice", "alice-gt")] == ["/gt.mp4"]
    assert refs.scored("bob", "alice-gt") == [] and refs.get("bob", "alice-gt") is None
    refs.put(Reference("alice-gt", SETTINGS, {}, {"Lip sync": 2.0}, {}, 1, 1, owner="bob"), [])  # bob's own now
    assert len(refs.scored("alice", "alice-gt")) == 2 and refs.get("alice", "alice-gt").raw == {"Lip sync": 1.0}
    refs.close()


def test_a_newer_schema_is_refused_per_schema(tmp_path):
    path = tmp_path / "store.sqlite"
    ReferenceStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schema_versions SET version = 99 WHERE name = 'references'")
    db.close()
    with pytest.raises(UserError, match=rf"references schema version 99, newer than this theval's {len(MIGRATIONS)}: upgrade"):
        ReferenceStore(path)
    SqlJobStore(path).close()  # the job store's own schema is not newer: it opens
    assert versions(path) == {"jobs": len(JOB_MIGRATIONS), "references": 99, "user_version": 1}


def test_migrations_run_once_in_order_and_a_failed_one_changes_nothing(tmp_path):
    path = tmp_path / "store.sqlite"
    calls = []
    steps = ["CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1)", lambda db: calls.append("second")]
    Database(path, "store", "test", steps).close()
    Database(path, "store", "test", steps).close()
    assert calls == ["second"]

    def broken(db):
        db.execute("CREATE TABLE c (x INTEGER)")
        raise RuntimeError("step 4 failed")
    with pytest.raises(RuntimeError, match="step 4 failed"):
        Database(path, "store", "test", steps + ["CREATE TABLE b (x INTEGER)", broken])
    with sqlite3.connect(path) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert db.execute("SELECT version FROM schema_versions WHERE name = 'test'").fetchone() == (2,)
    db.close()
    assert tables == {"a", "schema_versions"}  # step 3 undone with step 4: the file is as it was
    later = Database(path, "store", "test", steps + ["CREATE TABLE b (x INTEGER)"])
    assert later.rows("SELECT x FROM a") == [(1,)] and later.rows("SELECT count(*) FROM b") == [(0,)]
    later.close()


def test_a_transaction_that_raises_leaves_nothing(tmp_path):
    db = Database(tmp_path / "store.sqlite", "store", "test", ["CREATE TABLE a (x INTEGER)"])
    with pytest.raises(ValueError):
        with db.transaction() as conn:
            conn.execute("INSERT INTO a VALUES (1)")
            raise ValueError("undo")
    with db.transaction() as conn:
        conn.execute("INSERT INTO a VALUES (2)")
    assert db.rows("SELECT x FROM a") == [(2,)]
    db.close()


def _open_both(path, barrier):
    barrier.wait()  # all at once, on a file none has migrated yet
    SqlJobStore(path).close()
    ReferenceStore(path).close()


def test_an_old_store_opened_by_several_processes_at_once_migrates_once(tmp_path):
    """A job's driver, `theval bulk status` and the evaluator may open the file at the same moment
    (adding a column twice would fail)."""
    path = tmp_path / "store.sqlite"
    an_old_store(path, owners=False)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_open_both, args=(str(path), barrier)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert versions(path) == {"jobs": len(JOB_MIGRATIONS), "references": len(MIGRATIONS), "user_version": 1}
    refs = ReferenceStore(path)
    assert refs.get("", "gt").owner == "" and len(refs.scored("", "gt")) == 1
    refs.close()


def _create_at_once(folder: str, rounds: int, barrier, errors):
    """Open a new store in each round, when every process is ready: an error's text to `errors`."""
    for k in range(rounds):
        barrier.wait()
        try:
            SqlJobStore(f"{folder}/store{k}.sqlite").close()
        except Exception as err:  # noqa: BLE001 - the test reports what each process was told
            errors.put(f"round {k}: {type(err).__name__}: {err}")


def test_processes_creating_the_same_new_store_at_once_all_open_it(tmp_path):
    """Before: the first process's file was 0 bytes until its schema was written, and the others were
    told to delete it (in 28 of 30 trials)."""
    ctx = mp.get_context("spawn")
    processes, rounds = 4, 10
    barrier, errors = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_create_at_once, args=(str(tmp_path), rounds, barrier, errors))
             for _ in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    told = []
    while not errors.empty():
        told.append(errors.get())
    assert told == []
    for k in range(rounds):
        assert versions(tmp_path / f"store{k}.sqlite") == {"jobs": len(JOB_MIGRATIONS), "user_version": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"store{k}.sqlite" for k in range(rounds))


def test_a_job_stored_before_a_field_was_renamed_reads_under_its_new_name(tmp_path):
    """JobSpec.quality_store became weights_store: a job written before still opens, resumes
    with its weights folder."""
    store = SqlJobStore(tmp_path / "store.sqlite")
    job = store.create(JobSpec(inputs=[["GT", "/v"]], settings=RunSettings().key(), weights_store="/w"),
                       [Item("GT", "/v/a.mp4")])
    old = json.loads(store._query("SELECT spec FROM jobs WHERE id = ?", (job.id,))[0][0])
    old["quality_store"] = old.pop("weights_store")
    store._write(lambda db: db.execute("UPDATE jobs SET spec = ? WHERE id = ?", (json.dumps(old), job.id)))
    assert store.get(job.id).spec.weights_store == "/w"
    store.close()
