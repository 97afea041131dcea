"""Bulk scoring on an autoscaling Ray cluster configured from the RayCluster manifest: Ray's own
autoscaler (what ray.cluster_utils.AutoscalingCluster starts: its fake multi-node provider, worker
nodes as local raylet processes) with the worker group of the rendered `dev` overlay
(num-cpus, min/max replicas) and its idle timeout. The head has no CPUs, as in the manifest: a
job starts with no worker; the autoscaler adds workers up to the maximum while the backlog
lasts, every video is scored exactly once, and the workers go after the idle timeout.

The cluster stays on loopback behind a token (as the project's local Rays, jobs.pipeline), runs
from its own temp folder, and is stopped by killing its own process group (tests/support/ray_support.py):
never `ray stop`, which would stop every Ray on the machine."""
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tests.support.k8s_support import render, workspace
from tests.support.ray_support import RayHead
from theval_mesh.core.inputs import plan
from theval_mesh.jobs.pipeline import _private_ray, run_ray
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc.launcher import free_port
from theval_mesh.stores.job_store import JobSpec, SqlJobStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def worker_group(tmp: Path) -> dict:
    ray = next(o for o in render(workspace(tmp), "dev") if o["kind"] == "RayCluster")
    (group,) = ray["spec"]["workerGroupSpecs"]
    return {"cpus": int(group["rayStartParams"]["num-cpus"]), "min": group["minReplicas"],
            "max": group["maxReplicas"], "idle_s": ray["spec"]["autoscalerOptions"]["idleTimeoutSeconds"],
            "head_cpus": int(ray["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"])}


def autoscaling_config(group: dict, gcs_address: str) -> dict:
    """The Ray autoscaler's cluster config for its fake multi-node provider, as
    ray.cluster_utils.AutoscalingCluster makes it (its template, fake_multi_node/example.yaml, is
    not in the wheel): the head without CPUs, one worker type for the manifest's worker group."""
    return {
        "cluster_name": "theval-ray", "max_workers": group["max"], "head_node_type": "ray.head.default",
        "provider": {"type": "fake_multinode", "use_node_id_as_ip": True, "disable_node_updaters": True,
                     "disable_launch_config_check": True, "gcs_address": gcs_address},
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": group["head_cpus"]}, "node_config": {}, "max_workers": 0},
            "bulk": {"resources": {"CPU": group["cpus"]}, "node_config": {}, "min_workers": group["min"],
                     "max_workers": group["max"]}},
        "upscaling_speed": 1.0, "idle_timeout_minutes": group["idle_s"] / 60, "auth": {}, "docker": {},
        "initialization_commands": [], "setup_commands": [], "head_setup_commands": [], "worker_setup_commands": [],
        "head_start_ray_commands": [], "worker_start_ray_commands": [], "file_mounts": {},
        "cluster_synced_files": [], "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": []}


class Cluster(RayHead):
    """`ray start --head` with an autoscaling config of the fake multi-node provider."""

    def __init__(self, tmp: Path, group: dict):
        port = free_port()
        config = autoscaling_config(group, f"127.0.0.1:{port}")
        (tmp / "autoscaling.json").write_text(json.dumps(config))
        # Behind this process's Ray token, as the project's local Rays (jobs.pipeline._private_ray:
        # the driver here then uses the same token).
        _private_ray()
        super().__init__(tmp / "ray.log", {**os.environ, "AUTOSCALER_UPDATE_INTERVAL_S": "1", "RAY_FAKE_CLUSTER": "1"},
                         os.environ["RAY_AUTH_TOKEN"], f"--num-cpus={group['head_cpus']}",
                         f"--autoscaling-config={tmp / 'autoscaling.json'}", port=port)

    def workers(self) -> int:
        import ray
        return sum(1 for n in ray.nodes() if n["Alive"] and not n["Resources"].get("node:__internal_head__"))


def test_a_bulk_job_scales_the_worker_group_up_to_its_maximum_and_back(kit, tmp_path):
    import ray
    group = worker_group(tmp_path / "k8s")
    assert group["head_cpus"] == 0 and group["min"] == 0 < group["max"]
    cluster, stop = Cluster(tmp_path, group), threading.Event()
    try:
        cluster.wait_listening()
        # A driver given an address turns token auth on only from RAY_AUTH_MODE=token as its Ray
        # config read it: a fresh `theval bulk run --ray-address` reads it at start; this process
        # read it long ago, so Ray's own switch refreshes it.
        from ray._private.authentication.authentication_token_setup import _enable_token_auth
        _enable_token_auth()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        assert cluster.workers() == group["min"] == 0  # a job starts with no worker
        videos = [("GT", str(v)) for v in kit.videos("gt")] + \
                 [(m, str(v)) for m in kit.variants[:2] for v in kit.videos(m)]
        store = SqlJobStore(str(tmp_path / "jobs.sqlite"))
        workers = group["max"] * group["cpus"]  # one Ray actor per CPU of the largest cluster
        inputs = [("GT", str(Path(kit.out_dir) / "gt"))] + [(m, str(Path(kit.out_dir) / m)) for m in kit.variants[:2]]
        job = store.create(JobSpec(inputs=inputs, settings=RunSettings(quality="proxy").key(), workers=workers),
                           plan(inputs))
        assert job.total == len(videos)
        seen = []

        def watch():
            while not stop.is_set():
                seen.append((time.monotonic(), cluster.workers()))
                time.sleep(0.5)
        watcher = threading.Thread(target=watch)
        start = time.monotonic()
        watcher.start()
        finished = run_ray(store, job.id, workers=workers, ray_address=cluster.address)
        done_at = time.monotonic()
        assert finished.state == "done" and finished.done == job.total, finished
        with sqlite3.connect(tmp_path / "jobs.sqlite") as db:
            per_item = db.execute("SELECT count(r.model) FROM items i LEFT JOIN results r ON r.model=i.model AND "
                                  "r.video=i.video WHERE i.job=? GROUP BY i.seq", (job.id,)).fetchall()
        assert per_item == [(1,)] * job.total  # every video scored exactly once
        peak = max(n for _, n in seen)
        assert peak == group["max"], seen
        up_s = next(t for t, n in seen if n == group["max"]) - start
        # idle: back to the minimum after the idle timeout (and not before it)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False, ignore_reinit_error=True)
        end = done_at + group["idle_s"] + 180
        while cluster.workers() > group["min"]:
            assert time.monotonic() < end, f"still {cluster.workers()} workers {time.monotonic() - done_at:.0f} s idle"
            time.sleep(1)
        down_s = time.monotonic() - done_at
        stop.set()
        watcher.join()
        assert down_s >= group["idle_s"] - 5, down_s
        print(f"\nRay autoscaling (worker group of the dev overlay: {group['cpus']} CPUs, {group['min']}..{group['max']} "
              f"workers, idle timeout {group['idle_s']} s): 0 -> {group['max']} workers {up_s:.0f} s after the job "
              f"started; {job.total} videos on {workers} actors in {done_at - start:.0f} s; back to {group['min']} "
              f"{down_s:.0f} s after the last video")
    finally:
        stop.set()
        ray.shutdown()
        cluster.stop()
