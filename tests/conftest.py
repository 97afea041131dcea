import os
from pathlib import Path

import numpy as np
import pytest

from tests.support.netguard import block_network
from tests.support.video_files import write_video

# Keep torch/onnx from oversubscribing the 2 cores when tests run model code.
os.environ.setdefault("OMP_NUM_THREADS", "2")
# Every test scores afresh, whatever the developer's cache holds; the result cache's tests give their own.
os.environ["THEVAL_CACHE"] = "off"
# What the processes of one run share (xdist's workers inherit the controller's environment): the
# networks' exports (backends/inference/export.py), keyed by their weights' checksums, so the stand-in
# stores of every test export each network once per run; and the images' build report.
if "THEVAL_TEST_SHARED" not in os.environ:
    import atexit
    import shutil
    import tempfile
    os.environ["THEVAL_TEST_SHARED"] = tempfile.mkdtemp(prefix="theval-test-run-")
    atexit.register(shutil.rmtree, os.environ["THEVAL_TEST_SHARED"], True)
SHARED = Path(os.environ["THEVAL_TEST_SHARED"])
os.environ.setdefault("THEVAL_COMPILED", str(SHARED / "compiled"))


def is_xdist_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


def write_clip(path, frames=10, size=(64, 48), fps=25, audio_rate=16000, channels=1, tone=None,
               video_codec="libx264", audio_codec="aac"):
    """A small real video file: a moving gradient, and a sine tone per channel (None: no audio)."""
    w, h = size
    images = []
    for i in range(frames):
        img = np.zeros((h, w, 3), np.uint8)
        img[:, :, 0] = (np.arange(w) * 4 + i * 8) % 256
        images.append(img)
    audio = None
    if tone is not None:
        t = np.arange(int(audio_rate * frames / fps)) / audio_rate
        audio = np.stack([tone[c] * np.sin(2 * np.pi * 440 * t) for c in range(channels)]).astype(np.float32)
    write_video(path, images, fps, audio, audio_rate, video_codec, audio_codec)
    return str(path)


@pytest.fixture
def clip_writer(tmp_path):
    def make(name="clip.mp4", **kw):
        return write_clip(tmp_path / name, **kw)
    return make


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Sockets and DNS fail (the attempts are returned); torch/HF caches point at empty temp dirs."""
    attempts = []
    block_network(monkeypatch, attempts)
    for var in ("TORCH_HOME", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "caches" / var))
    return attempts


@pytest.fixture(scope="session")
def fake_store():
    """FAKE weights of every quality model (see fake_weights.py): random weights of the real
    architectures, under the published file names; written once per run (tests/support/once.py)."""
    from tests.support.fake_weights import write_fake_store
    from tests.support.once import once_per_run, shared_folder
    return once_per_run("fake_store", lambda: write_fake_store(shared_folder("fake-weights")))


@pytest.fixture(scope="session")
def headpose_store():
    """FAKE head-pose weights (see fake_weights.py): the stand-in FaceXFormer model.pt and
    retina-face retinaface.h5 only (a store where `--headpose auto` picks FaceXFormer)."""
    from tests.support.fake_weights import write_fake_store
    from tests.support.once import once_per_run, shared_folder
    return once_per_run("headpose_store",
                        lambda: write_fake_store(shared_folder("fake-headpose-weights"), (), headpose=True))


STAND_IN_STORES = {"fake_store", "headpose_store", "face_store"}  # face_store: test_quality_gfiqa.py's


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """A test that uses the PostgreSQL server (the `postgres` fixture, itself or through another
    fixture) is marked `postgres`, and one that uses a store of stand-in networks (written at their
    real sizes: about 20 s) `slow`; `./dev check` deselects both.

    Order: the longest files first (tests/durations.txt), so that xdist's two workers, which take
    whole files in this order (`--no-loadscope-reorder`), end together rather than one running a
    long file alone at the end; the container tests last: their images build in the background
    meanwhile."""
    from tests.support.container_support import is_container_test
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "postgres" in fixtures:
            item.add_marker(pytest.mark.postgres)
        if STAND_IN_STORES.intersection(fixtures):
            item.add_marker(pytest.mark.slow)
    seconds = file_seconds()
    items.sort(key=lambda item: (is_container_test(item), -seconds.get(item.nodeid.split("::")[0], 0.0)))


def file_seconds() -> dict[str, float]:
    """tests/durations.txt: test file -> its seconds in a measured run (scripts/test_durations.py)."""
    table = Path(__file__).with_name("durations.txt")
    lines = table.read_text().splitlines() if table.exists() else []
    return {path: float(s) for s, path in (line.split() for line in lines if line.strip())}


def pytest_collection_finish(session):
    """One process (no xdist): the images start building as soon as container tests are collected."""
    if not session.config.option.collectonly and not is_xdist_worker():
        start_prebuild(session.config, [i.nodeid for i in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Under xdist (`./dev test` runs -n 2) the controller builds the images, once, for whichever
    worker runs the container tests, and stops the build and the engine after every worker ended."""
    start_prebuild(node.config, ids)


def start_prebuild(config, nodeids):
    from tests.support.container_support import Prebuild, is_container_test
    if getattr(config, "theval_prebuild", None) is None and any(map(is_container_test, nodeids)):
        config.theval_prebuild = Prebuild(SHARED / "images")


def pytest_sessionfinish(session):
    prebuild = getattr(session.config, "theval_prebuild", None)
    if prebuild is not None:
        prebuild.stop()


@pytest.fixture(scope="session")
def built_images(request):
    """{image name: {image, bytes, seconds}}: every image, built from the wheelhouse."""
    from tests.support.container_support import Prebuild
    prebuild = getattr(request.config, "theval_prebuild", None)
    return prebuild.wait() if prebuild is not None else Prebuild.wait_elsewhere(SHARED / "images")


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for the session (tests/support/postgres_support.py); libpq finds its
    password through PGPASSFILE, as a deployment's would."""
    from tests.support.postgres_support import PostgresServer, wait_until_accepting
    from theval_mesh.rpc.launcher import free_port
    server = PostgresServer(free_port())
    server.start()
    wait_until_accepting(server)
    before = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(server.passfile)
    yield server
    if before is None:
        os.environ.pop("PGPASSFILE", None)
    else:
        os.environ["PGPASSFILE"] = before
    server.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_location(request, tmp_path):
    """Where a store lives, once per database: a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "store.sqlite")
        return
    with request.getfixturevalue("postgres").database() as url:
        yield url


@pytest.fixture
def figure(record_property):
    """figure(line): a measured figure (a load test's throughput, say), printed at the end of the
    run in its own section, from xdist's workers too (a worker's own output is not shown)."""
    return lambda line: record_property("figure", line)


FIGURES: list[str] = []


def _cpu_seconds() -> float:
    """CPU this process and its waited-for children (servers stopped, commands run) have used."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


_CPU_MARK = [0.0]


def pytest_runtest_logstart(nodeid, location):
    _CPU_MARK[0] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report carries the CPU seconds it used (xdist sends it to the controller): on
    two busy cores a test's wall time says little about what it costs the run."""
    outcome = yield
    now = _cpu_seconds()
    outcome.get_result().cpu_s = round(now - _CPU_MARK[0], 2)
    _CPU_MARK[0] = now


def pytest_runtest_logreport(report):
    """Collects the figures; THEVAL_TEST_TIMES=FILE also appends each test phase's wall and CPU
    seconds as it ends, so that a run stopped by a time limit still shows where its time went."""
    if is_xdist_worker():
        return  # the controller gets the same report
    FIGURES.extend(value for name, value in report.user_properties if name == "figure")
    path = os.environ.get("THEVAL_TEST_TIMES")
    if path and (report.duration >= 0.5 or report.failed):
        with open(path, "a") as out:
            out.write(f"{report.duration:9.2f} {getattr(report, 'cpu_s', float('nan')):9.2f} {report.when:8} "
                      f"{report.outcome:7} {report.nodeid}\n")


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("measured figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
