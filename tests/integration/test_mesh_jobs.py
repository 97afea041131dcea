"""The evaluator's bulk-job API (SubmitJob, GetJob, StreamJob, CancelJob) on a real mesh, each
job run by its own driver process on a real local Ray. The jobs' API, not metric values: one
FaceMesh pass (--single-pass) keeps them fast."""
import os

import grpc
import pytest

from tests.support.mesh_support import Mesh, scrape
from theval_mesh.rpc.v1 import evaluator_pb2
from theval_mesh.synth import generate_kit, write_bad_inputs

pytestmark = pytest.mark.slow
C = grpc.StatusCode


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    kit = generate_kit(root / "kit", seed=9, n_clips=2, duration_s=1.5, size=128, variants=())
    for name, n in (("small", 6), ("large", 60)):
        (root / name).mkdir()
        for i in range(n):
            os.link(kit.videos()[i % 2], root / name / f"c{i:03d}.mp4")
    write_bad_inputs(root / "small" / "bad", size=128, duration_s=1.5)
    return root


@pytest.fixture(scope="module")
def mesh(videos, tmp_path_factory):
    m = Mesh(tmp_path_factory.mktemp("mesh"), roots=[videos], evaluator_args=["--job-workers", "2", "--single-pass"]).start()
    yield m
    m.stop()


def test_a_submitted_job_streams_its_progress_to_the_end(mesh, videos):
    job = mesh.evaluator.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(videos / "small")), timeout=120)
    assert job.id.startswith("job-") and job.total == 6 + 4 and job.state in ("queued", "running")
    events = list(mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=600))
    assert events[-1].state == "done", events[-1]
    done = [e.done + e.failed for e in events]
    assert done == sorted(done) and len(events) >= 2  # it moved, never backwards
    final = mesh.evaluator.GetJob(evaluator_pb2.JobRequest(id=job.id), timeout=30)
    # no_audio scores, and so does no_face (profile reference scores it as the reference code does)
    assert (final.total, final.done, final.failed, final.remaining) == (10, 8, 2, 0)
    assert final.finished_unix >= final.started_unix > 0
    samples = scrape(mesh.procs["evaluator"].metrics_url)  # the evaluator reads its job store
    assert samples[("theval_jobs", frozenset({("state", "done")}))] >= 1


def test_a_cancelled_job_stops_and_keeps_what_it_committed(mesh, videos):
    job = mesh.evaluator.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(videos / "large"), workers=1), timeout=120)
    for event in mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=600):
        if event.done >= 2:
            break
    mesh.evaluator.CancelJob(evaluator_pb2.JobRequest(id=job.id), timeout=30)
    final = list(mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=600))[-1]
    assert final.state == "cancelled" and 2 <= final.done < 60 and final.remaining == 60 - final.done


def test_a_jobs_gt_held_by_the_callers_reference_set_is_not_scored_again(mesh, videos):
    """A reference set scored these GT files (same bytes, settings, backends): a job on them
    scores only the model's videos; the landmarks service decodes the model's frames alone."""
    from tests.support.mesh_support import sample
    from theval_mesh.backends.media.decode import MediaReader
    from theval_mesh.rpc.v1 import common_pb2
    kit = generate_kit(videos / "kit-ref", seed=4, n_clips=2, duration_s=1.5, size=96, variants=())
    for folder in ("ref-gt", "ref-model"):
        (videos / folder).mkdir()
        for i, clip in enumerate(kit.videos()):
            os.link(clip, videos / folder / f"v{i}.mp4")
    mesh.evaluator.CreateReference(evaluator_pb2.CreateReferenceRequest(
        name="ref", videos=[common_pb2.VideoRef(uri=str(videos / "ref-gt"))]), timeout=300)
    landmarks = mesh.procs["landmarks"].metrics_url

    def decoded():
        return sample(scrape(landmarks), "theval_frames_processed_total", service="landmarks")
    before = decoded()
    job = mesh.evaluator.SubmitJob(evaluator_pb2.SubmitJobRequest(
        gt=str(videos / "ref-gt"), models=[evaluator_pb2.ModelVideos(name="m", path=str(videos / "ref-model"))]),
        timeout=120)
    assert job.total == 4 and job.done == 2  # the GT's two, committed before the driver started
    final = list(mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=600))[-1]
    assert (final.state, final.done, final.failed) == ("done", 4, 0), final
    model_frames = sum(MediaReader(str(p)).info.header_frames for p in (videos / "ref-model").iterdir())
    assert decoded() - before == model_frames  # the model's frames only


def test_job_requests_outside_the_rules_get_their_status(mesh, tmp_path):
    def code(call):
        try:
            call()
        except grpc.RpcError as err:
            return err.code(), err.details()
        return C.OK, ""
    got, detail = code(lambda: mesh.evaluator.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(tmp_path)), timeout=30))
    assert got == C.PERMISSION_DENIED, (got, detail)  # a path outside the allowed roots
    assert "outside" in detail, detail
    got, detail = code(lambda: mesh.evaluator.GetJob(evaluator_pb2.JobRequest(id="job-nope"), timeout=30))
    assert got == C.NOT_FOUND and "job-nope" in detail
    got, _ = code(lambda: list(mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id="job-nope"), timeout=30)))
    assert got == C.NOT_FOUND


OPERATOR = "operator-token-" + "o" * 24


def test_a_job_rides_through_an_evaluator_restart_and_an_interrupted_one_resumes(videos, tmp_path):
    """With tokens on, a job's workers call Evaluate with the job's own token. The evaluator,
    SIGKILLed mid-job and started again on the same port, still knows that token (the job store
    keeps its digest): the job ends done with every video once. A job whose driver is killed is
    interrupted, ResumeJob starts it again and it ends done; a done job is not resumed."""
    from theval_mesh.rpc.security import ClientSecurity
    from theval_mesh.stores.job_store import SqlJobStore
    tokens = tmp_path / "tokens"
    tokens.write_text(f"operator {OPERATOR}\n")
    tokens.chmod(0o600)
    (tmp_path / "mesh").mkdir()
    mesh = Mesh(tmp_path / "mesh", roots=[videos], security={"evaluator": ClientSecurity(token=OPERATOR)},
                evaluator_args=["--job-workers", "1", "--single-pass", "--tokens-file", str(tokens)]).start()
    try:
        def job_of(gt, until_done):
            job = mesh.evaluator.SubmitJob(evaluator_pb2.SubmitJobRequest(gt=str(gt)), timeout=120)
            for event in mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=job.id), timeout=600):
                if event.done >= until_done:
                    return event
            raise AssertionError(f"{job.id} ended before {until_done} videos were done")

        first = job_of(videos / "large", 2)
        mesh.procs["evaluator"].kill()
        mesh.procs["evaluator"].start()  # on the same ports, as a supervisor restarts it
        mesh.wait_serving()
        final = list(mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=first.id), timeout=900))[-1]
        assert (final.state, final.done, final.failed) == ("done", 60, 0), final
        store = SqlJobStore(mesh.store)
        assert len(list(store.results(first.id))) == 60

        other = videos / "large-again"  # other paths: nothing of the first job is reused
        other.mkdir()
        for clip in (videos / "large").iterdir():
            os.link(clip, other / clip.name)
        second = job_of(other, 2)
        os.kill(int(store.get(second.id).driver.split(":")[1]), 9)  # host:pid:start
        last = list(mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=second.id), timeout=120))[-1]
        assert last.state == "interrupted", last
        resumed = mesh.evaluator.ResumeJob(evaluator_pb2.JobRequest(id=second.id), timeout=60)
        assert resumed.state in ("queued", "running") and resumed.done >= 2 and not resumed.error
        final = list(mesh.evaluator.StreamJob(evaluator_pb2.JobRequest(id=second.id), timeout=900))[-1]
        assert (final.state, final.done) == ("done", 60), final
        with pytest.raises(grpc.RpcError) as refused:
            mesh.evaluator.ResumeJob(evaluator_pb2.JobRequest(id=second.id), timeout=60)
        assert refused.value.code() == C.FAILED_PRECONDITION and "is done" in refused.value.details()
        store.close()
    finally:
        mesh.stop()
