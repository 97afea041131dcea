"""Prometheus metrics of the jobs: what a job's driver does (counters and gauges it updates), and the
job store read at each scrape (the collector the evaluator and a job's driver register)."""
import prometheus_client as prom
from prometheus_client.core import GaugeMetricFamily

from theval_mesh.rpc.telemetry import LATENCY_BUCKETS
from theval_mesh.stores.job_store import FINISHED

# A job's driver process (jobs/drivers.py)
JOBS_RUNNING = prom.Gauge("theval_jobs_running", "jobs this process is driving now")
JOBS_FINISHED = prom.Counter("theval_jobs_finished", "jobs this process stopped driving, by final state",
                             ["state"])
JOB_VIDEOS = prom.Counter("theval_job_videos", "videos a job committed, by outcome (ok, failed: a bad video)",
                          ["outcome"])
JOB_RETRIES = prom.Counter("theval_job_retries", "videos sent back to the queue after a transient failure")
JOB_IN_FLIGHT = prom.Gauge("theval_job_in_flight", "videos queued on or being scored by the workers (the "
                           "orchestrator's queue depth)")
CACHE_LOOKUPS = prom.Counter("theval_result_cache_lookups", "per-video result cache lookups, by outcome (hit: "
                             "reused; miss: scored; stale, corrupt: an entry deleted and scored again)",
                             ["outcome"])
STAGE_SECONDS = prom.Histogram("theval_compute_seconds", "compute time per video, by stage (landmarks, quality, "
                               "audio, head_pose) and per metric (metric:<key>)", ["stage"],
                               buckets=(0.0001, 0.001) + LATENCY_BUCKETS)



def observe_stages(timings: dict):
    """A scored video's seconds per stage and per metric (VideoResult.timings), into STAGE_SECONDS:
    by a job's driver for each video it commits, by the evaluator for each video it scores."""
    for stage, seconds in timings.items():
        STAGE_SECONDS.labels(stage).observe(seconds)

class _JobsCollector:
    """Read at each scrape from the job store: jobs by state, and the unfinished jobs' videos,
    per job or summed (a shared evaluator's /metrics must not list its callers' job ids)."""

    def __init__(self, store, per_job: bool):
        self.store, self.per_job = store, per_job

    def collect(self):
        by_state = GaugeMetricFamily("theval_jobs", "jobs in the job store, by state", labels=["state"])
        videos = GaugeMetricFamily("theval_job_progress_videos", "videos of the unfinished jobs, by outcome "
                                   "(done, failed, remaining)", labels=(["job"] if self.per_job else []) + ["outcome"])
        counts: dict = {}
        totals: dict = {"done": 0, "failed": 0, "remaining": 0}
        for job in self.store.jobs():
            counts[job.state] = counts.get(job.state, 0) + 1
            if job.state not in FINISHED:
                for outcome, n in (("done", job.done), ("failed", job.failed), ("remaining", job.remaining)):
                    totals[outcome] += n
                    if self.per_job:
                        videos.add_metric([job.id, outcome], n)
        if not self.per_job:
            for outcome, n in totals.items():
                videos.add_metric([outcome], n)
        for state, n in sorted(counts.items()):
            by_state.add_metric([state], n)
        yield by_state
        yield videos


def register_jobs(store, per_job: bool = True):
    """Expose the job store's jobs on this process's /metrics (per_job: one series per job)."""
    prom.REGISTRY.register(_JobsCollector(store, per_job))
