"""Bulk jobs run by the tests: a job's run_ray in a background thread, waited on by its progress."""
import threading
import time

from theval_mesh.jobs.pipeline import run_ray


def run_until(store, job_id: str, workers: int, done: int, timeout: float = 300):
    """Start run_ray(store, job_id) in a thread and return once `done` videos are committed:
    (the thread, a dict that holds the finished Job under "job")."""
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(job=run_ray(store, job_id, workers=workers)))
    runner.start()
    end = time.monotonic() + timeout
    while store.get(job_id).done < done:
        assert time.monotonic() < end and runner.is_alive(), "the job made no progress"
        time.sleep(0.05)
    return runner, outcome
