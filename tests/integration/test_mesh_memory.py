"""Memory under concurrent callers, on the real mesh (`theval serve` processes on loopback),
measured as each process's peak resident memory (mesh_support.peak_rss_mib, reset first):

  - 8 concurrent Evaluate calls of a small file whose header says 6000x6000 are refused from the
    header, before any process decodes a frame (each used to decode a 54 MB picture first; a
    16000x16000 header took a probe's evaluator from 169 MB to 4.8 GB);
  - videos reserve the evaluator's memory budget before any service is called: 8 concurrent calls
    with room for 2 are all scored, never more than the budget reserved at once, and the
    evaluator's peak stays within the budget; a video larger than the whole budget is refused.
"""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from tests.support.mesh_support import Mesh, peak_rss_mib, reset_peak_rss, sample, scrape
from tests.support.video_files import gradient, raw_h264, tone, write_video
from theval_mesh.backends.media.decode import MediaReader
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc.memory_budget import MIB, video_bytes

pytestmark = pytest.mark.slow
C = grpc.StatusCode


def _code(call) -> tuple:
    try:
        call()
        return C.OK, ""
    except grpc.RpcError as err:
        return err.code(), err.details()


def _concurrently(n: int, call) -> list:
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: _code(call), range(n)))


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "videos"
    folder.mkdir()
    return folder


def test_huge_headers_are_refused_before_any_process_decodes_a_frame(tmp_path, root):
    huge = raw_h264(root / "huge.mp4", [(6000, 6000, 1)])  # 100 kB
    mesh = Mesh(tmp_path, [root]).start()
    try:
        pids = {name: p.proc.pid for name, p in mesh.procs.items()}
        for pid in pids.values():
            reset_peak_rss(pid)
        before = {name: peak_rss_mib(pid) for name, pid in pids.items()}
        answers = _concurrently(8, lambda: mesh.evaluate(uri=huge, timeout=120))
        grown = {name: peak_rss_mib(pid) - before[name] for name, pid in pids.items()}
    finally:
        mesh.stop()
    assert {code for code, _ in answers} == {C.RESOURCE_EXHAUSTED}, answers
    assert all(detail.startswith("resolution 6000x6000 is over the 4096 px limit") for _, detail in answers)
    print(f"\npeak memory growth over 8 concurrent 6000x6000 headers, MiB: "
          f"{ {k: round(v, 1) for k, v in grown.items()} }")
    # ffmpeg's parser still sizes its tables by the header (~7 MiB a call here); one decoded picture
    # alone is 54 MB, and the 8 calls decoded 8 of them (~700 MiB) before the header was checked first.
    assert max(grown.values()) < 100, grown


def test_videos_wait_for_the_evaluators_memory_budget(tmp_path, root):
    clip = write_video(root / "clip.mp4", gradient(100, 128, 128), audio=tone(4.0))
    each = video_bytes(MediaReader(clip).info, RunSettings(quality="proxy"))
    budget_mib = int(2.5 * each / MIB)  # room for two at a time
    too_long = write_video(root / "long.mp4", gradient(600, 64, 64), audio=tone(24.0))
    mesh = Mesh(tmp_path, [root], evaluator_args=["--memory-budget-mb", str(budget_mib)]).start()
    reserved, stop = [], threading.Event()

    def watch():
        url = mesh.procs["evaluator"].metrics_url
        while not stop.is_set():
            reserved.append(sample(scrape(url), "theval_memory_reserved_bytes"))
            time.sleep(0.02)
    try:
        pid = mesh.procs["evaluator"].proc.pid
        # One-time costs (lazy imports, the fan-out pool's threads, gRPC buffers) are not the
        # budget's: two calls at once before measuring (CI once saw 76 MiB grown on a 67 MiB budget).
        assert [code for code, _ in _concurrently(2, lambda: mesh.evaluate(uri=clip, timeout=300))] == [C.OK] * 2
        reset_peak_rss(pid)
        before = peak_rss_mib(pid)
        watcher = threading.Thread(target=watch)
        watcher.start()
        answers = _concurrently(8, lambda: mesh.evaluate(uri=clip, timeout=300))
        stop.set()
        watcher.join()
        grown = peak_rss_mib(pid) - before
        after = scrape(mesh.procs["evaluator"].metrics_url)
        refused = _code(lambda: mesh.evaluate(uri=too_long, timeout=120))
    finally:
        mesh.stop()
    print(f"\nevaluator peak growth over 8 calls, budget {budget_mib} MiB: {grown:.1f} MiB")
    assert [code for code, _ in answers] == [C.OK] * 8, answers
    budget = sample(after, "theval_memory_budget_bytes")
    assert budget == budget_mib * MIB
    assert 2 * each <= max(reserved) <= budget  # two at a time, never more
    assert sample(after, "theval_memory_reserved_bytes") == 0  # every reservation released
    assert grown < budget_mib, f"the evaluator grew by {grown:.0f} MiB, over its {budget_mib} MiB budget"
    code, detail = refused
    assert code == C.RESOURCE_EXHAUSTED and "THEVAL_MEMORY_BUDGET_MB" in detail, refused
