"""Score many videos: in-process with --workers 1, else a pool of processes that each load
the models once. Results are logged durably as they finish; finished videos are skipped."""
import multiprocessing as mp
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

from tqdm import tqdm

from .engine import Engine
from .inputs import Item
from .result_log import ResultLog
from .results import FAILED, VideoResult
from .settings import RunSettings

_worker: dict = {}
FRAME_TICK = 16  # frames per progress message from a worker


def _init_worker(settings: RunSettings, quality_store, queue, threads: int):
    import torch
    torch.set_num_threads(threads)
    _worker["queue"] = queue
    try:
        _worker["engine"] = Engine(settings, quality_store)
    except Exception as err:  # raised from the first task, else the pool respawns workers forever
        _worker["error"] = err


def _score_in_worker(item: Item) -> VideoResult:
    if "error" in _worker:
        raise _worker["error"]
    pending = [0]

    def tick(n):
        pending[0] += n
        if pending[0] >= FRAME_TICK:
            _worker["queue"].put(pending[0])
            pending[0] = 0
    result = _worker["engine"].score_video(item.video, item.model, on_frames=tick)
    _worker["queue"].put(pending[0])
    return result


def _missing(item: Item, settings: RunSettings) -> VideoResult:
    return VideoResult(item.model, item.video, FAILED, item.missing, settings=settings.key())


def _report(result: VideoResult, bar):
    if result.status == FAILED:
        bar.write(f"FAILED  [{result.model}] {result.video}: {result.reason}")
    for w in result.warnings:
        if not w.startswith("Traceback"):
            bar.write(f"warning [{result.model}] {result.video}: {w}")


def run(items: list[Item], settings: RunSettings, log: ResultLog, workers: int = 1,
        quality_store=None, progress: bool = True, engine: Engine | None = None) -> list[VideoResult]:
    """Score every item not yet in the log; return the log's results for these settings."""
    key = settings.key()
    todo = [it for it in items if not log.has(it.model, it.video, key)]
    skipped = len(items) - len(todo)
    videos = tqdm(total=len(items), initial=skipped, desc="videos", unit="video", disable=not progress,
                  position=0)
    frames = tqdm(desc="frames", unit="frame", disable=not progress, position=1)
    if skipped:
        videos.write(f"resuming: {skipped} video(s) already scored with these settings are skipped",
                     file=sys.stderr)
    try:
        for it in [it for it in todo if it.missing]:
            result = _missing(it, settings)
            log.append(result)
            _report(result, videos)
            videos.update(1)
        todo = [it for it in todo if not it.missing]
        if engine is not None and getattr(engine, "concurrent", False) and workers > 1:
            _run_threads(todo, engine, log, workers, videos, frames)
        elif workers <= 1 or len(todo) <= 1:
            engine = engine or Engine(settings, quality_store)
            for it in todo:
                result = engine.score_video(it.video, it.model, on_frames=frames.update)
                log.append(result)
                _report(result, videos)
                videos.update(1)
        else:
            _run_pool(todo, settings, log, workers, quality_store, videos, frames)
    finally:
        frames.close()
        videos.close()
    wanted = {(it.model, it.video) for it in items}
    return [r for r in log.results(key) if (r.model, r.video) in wanted]


def _run_threads(todo, engine, log, workers, videos, frames):
    """`workers` calls in flight on a thread-safe engine (the mesh client: the work is remote)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running = [pool.submit(engine.score_video, it.video, it.model) for it in todo]
        try:
            for done in as_completed(running):
                result = done.result()
                frames.update(result.frames_total)
                log.append(result)
                _report(result, videos)
                videos.update(1)
        except BaseException:
            for f in running:
                f.cancel()
            raise


def _run_pool(todo, settings, log, workers, quality_store, videos, frames):
    ctx = mp.get_context("spawn")  # torch and MediaPipe are not fork-safe
    queue = ctx.Queue()
    threads = max(1, (os.cpu_count() or 1) // workers)
    stop = threading.Event()

    def drain():
        while not stop.is_set():
            try:
                frames.update(queue.get(timeout=0.2))
            except Exception:  # queue.Empty, or the queue closed at shutdown
                pass
    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    pool = ctx.Pool(workers, initializer=_init_worker, initargs=(settings, quality_store, queue, threads))
    try:
        for result in pool.imap_unordered(_score_in_worker, todo):
            log.append(result)
            _report(result, videos)
            videos.update(1)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        stop.set()
        drainer.join()
