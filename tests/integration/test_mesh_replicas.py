"""Two evaluators on one PostgreSQL store (a real server, tests/support/postgres_support.py) in front of
the same four services: what the Kubernetes evaluator Deployment with more than one replica
relies on. A GT reference set made through one is scored against through the other, a video
scored through either counts in the leaderboard of both, and a job submitted to one is followed,
cancelled and read through the other."""
import pytest

from tests.support.mesh_support import Mesh
from theval_mesh.rpc.config import DEPENDENCIES
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2
from theval_mesh.synth import generate_kit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return generate_kit(tmp_path_factory.mktemp("kit"), seed=5, n_clips=2, duration_s=1.5, size=128, variants=())


@pytest.fixture(scope="module")
def pods(kit, postgres, tmp_path_factory):
    with postgres.database() as url:
        args = ["--single-pass", "--job-workers", "1"]
        a = Mesh(tmp_path_factory.mktemp("pod-a"), roots=[kit.out_dir], evaluator_args=args, store=url).start()
        ports = {d: int(a.procs[d].address.rpartition(":")[2]) for d in DEPENDENCIES}
        b = Mesh(tmp_path_factory.mktemp("pod-b"), roots=[kit.out_dir], evaluator_args=args, store=url, ports=ports)
        try:
            yield a, b.start_evaluator()
        finally:
            b.stop()
            a.stop()


def test_a_set_made_through_one_pod_scores_through_the_other(pods, kit):
    a, b = pods
    folder = common_pb2.VideoRef(uri=str(kit.dir()))
    made = a.evaluator.CreateReference(evaluator_pb2.CreateReferenceRequest(name="gt", videos=[folder]), timeout=300)
    assert made.scored == 2
    assert [r.name for r in b.evaluator.ListReferences(evaluator_pb2.ListReferencesRequest(), timeout=30).references] \
        == ["gt"]
    for pod, video in zip((a, b), kit.videos()[:2]):
        scored = pod.evaluate(video, reference="gt", model="m", timeout=300)
        assert scored.result.status == "ok" and scored.scores.reference == "gt"
    boards = [p.evaluator.GetLeaderboard(evaluator_pb2.GetLeaderboardRequest(reference="gt"), timeout=30)
              for p in (a, b)]
    assert boards[0] == boards[1]
    (row,) = [r for r in boards[0].rows if r.model == "m"]
    assert set(row.counts.values()) == {2}  # one video through each pod


def test_a_job_submitted_to_one_pod_is_followed_and_cancelled_through_the_other(pods, kit):
    a, b = pods
    job = a.evaluator.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(kit.dir())), timeout=120)
    events = list(b.evaluator.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=600))
    assert events[-1].state == "done" and events[-1].done == 2
    results = list(b.evaluator.GetJobResults(evaluator_pb2.JobRequest(id=job.id), timeout=60))
    assert sorted(r.video for r in results) == sorted(str(v) for v in kit.videos()[:2])
    second = a.evaluator.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(kit.dir())), timeout=120)
    # its videos are scored already (same settings): it is done at once, and a cancel keeps it done
    final = list(b.evaluator.StreamJob(evaluator_pb2.JobRequest(id=second.id), timeout=600))[-1]
    assert final.state == "done" and final.done == 2
    assert b.evaluator.CancelJob(evaluator_pb2.JobRequest(id=second.id), timeout=30).state == "done"
