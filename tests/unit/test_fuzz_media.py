"""Seeded byte mutations of real videos (tests/support/media_fuzz.py) through every part that parses them:
the decoder (each mutant in a child process, so a native crash is caught and named), the job's
scorer in this process (jobs.pipeline.ScoringWorker: what `theval evaluate` and bulk jobs run), and the
evaluator over gRPC (the in-process mesh: real servers on loopback). Every outcome is a result, or
that video's failure with a one-line reason: never an exception out of the scorer, a crash, a hang
or INTERNAL. The inputs that once broke one of them (tests/data/fuzz/crash-*) run through all three.

A mutant found bad is kept in $THEVAL_TEST_ARTEFACTS (else the test's tmp folder), named by base,
seed and index, to add to tests/data/fuzz once understood."""
import os
import re
import shutil
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support import media_fuzz
from theval_mesh.core.results import FAILED, OK
from theval_mesh.jobs.pipeline import ScoringWorker
from theval_mesh.pure.settings import RunSettings
from theval_mesh.stores.job_store import JobSpec

pytestmark = pytest.mark.slow
C = grpc.StatusCode
DECODER_SEEDS = {"talking_head.mp4": 1, "talking_head.mkv": 2}
DECODER_MUTANTS = 300  # per base: 600 through the decoder (about a minute)
SCORER_SEED, SCORED_MUTANTS = 3, 25  # per base, through the scorer and through the evaluator
CRASHES = [media_fuzz.DATA / name for name in media_fuzz.CRASHES]


def artefacts(tmp_path) -> Path:
    return Path(os.environ.get("THEVAL_TEST_ARTEFACTS") or tmp_path) / "fuzz"


def scored_inputs(folder: Path) -> list[Path]:
    """The kept crashes and SCORED_MUTANTS mutants of each base, written to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [Path(shutil.copy(p, folder / p.name)) for p in CRASHES]
    for base in media_fuzz.BASES:
        for i, data in media_fuzz.mutants(media_fuzz.DATA / base, SCORER_SEED, SCORED_MUTANTS):
            path = folder / f"{Path(base).stem}-s{SCORER_SEED}-{i}{Path(base).suffix}"
            path.write_bytes(data)
            paths.append(path)
    return paths


def one_line(reason: str | None) -> bool:
    return bool(reason) and "\n" not in reason and "Traceback" not in reason and len(reason) <= 1000


def test_the_inputs_that_once_crashed_the_decoder_are_decoded_or_refused():
    assert len(CRASHES) >= 4
    outcomes = {p.name: media_fuzz.decode_in_child(p) for p in CRASHES}
    assert set(outcomes.values()) <= {"ok", "VideoError"}, outcomes


def test_mutants_decode_to_a_result_or_a_video_error_never_a_crash(tmp_path):
    keep = artefacts(tmp_path)
    for base, seed in DECODER_SEEDS.items():
        summary = media_fuzz.run(media_fuzz.DATA / base, seed, DECODER_MUTANTS, tmp_path, keep)
        outcomes = summary["outcomes"]
        assert summary["bad"] == [], f"{base} seed {seed}: {summary['bad']} (kept in {keep})"
        assert sum(outcomes.values()) == DECODER_MUTANTS
        # The mutations reach both sides: some still decode, most are refused.
        assert outcomes["ok"] >= 0.05 * DECODER_MUTANTS and outcomes["VideoError"] >= 0.3 * DECODER_MUTANTS, outcomes


def test_the_job_scorer_turns_every_mutant_into_a_result(tmp_path):
    """pipeline.ScoringWorker.score is what a Ray actor and an inline run call for each video: whatever
    the file, it answers ("ok", a result), never raises; a failure carries a one-line reason."""
    paths = scored_inputs(tmp_path / "videos")
    scorer = ScoringWorker(JobSpec(inputs=[["GT", str(tmp_path)]], settings=RunSettings(quality="proxy",
                                                                                   single_pass=True).key()))
    statuses = {}
    for path in paths:
        kind, result = scorer.score("m", str(path))
        assert kind == "ok", (path.name, result)
        assert result.video == str(path) and result.status in (OK, FAILED)
        assert result.status == OK or one_line(result.reason), (path.name, result.reason)
        assert not any("Traceback" in w for w in result.warnings)
        statuses[path.name] = result.status
    assert statuses["crash-video-codec-unknown.mp4"] == FAILED
    assert statuses["crash-audio-layout-changes.mkv"] == OK  # scored; its audio unusable, with the reason
    assert OK in statuses.values() and FAILED in statuses.values()


def test_the_evaluator_answers_every_mutant_with_a_result_or_a_clean_status(inprocess_mesh, tmp_path):
    """Through the evaluator (and the four services behind it): INVALID_ARGUMENT or
    RESOURCE_EXHAUSTED with a one-line detail for a bad file, never INTERNAL or UNKNOWN; every
    service still serving, and a good clip scored, afterwards."""
    mesh = inprocess_mesh
    codes = {}
    for path in scored_inputs(mesh.root / "fuzz"):
        try:
            mesh.evaluate(uri=str(path), timeout=120)
            codes[path.name] = C.OK
        except grpc.RpcError as err:
            codes[path.name] = err.code()
            assert err.code() in (C.INVALID_ARGUMENT, C.RESOURCE_EXHAUSTED), (path.name, err.code(), err.details())
            detail = err.details()
            assert one_line(detail), (path.name, detail)
            assert "internal error" not in detail or re.search(r"see the log \(error [0-9a-f]{8}\)", detail), detail
    assert codes["crash-video-codec-unknown.mp4"] == C.INVALID_ARGUMENT
    assert C.OK in codes.values() and C.INVALID_ARGUMENT in codes.values()
    good = shutil.copy(media_fuzz.DATA / "talking_head.mp4", mesh.root / "fuzz-good.mp4")
    assert mesh.evaluate(uri=str(good), timeout=120).result.status == OK
    for server in [mesh.evaluator, *mesh.leaves.values()]:
        with grpc.insecure_channel(server.address) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
        assert status == health_pb2.HealthCheckResponse.SERVING, server.address


REENCODE_CHILD = """
import sys
from theval_mesh.pure.errors import VideoError
from theval_mesh.synth import reencode
for k, path in enumerate(sys.argv[2:]):
    kind = reencode.KINDS[k % len(reencode.KINDS)]
    try:
        reencode.reencode(path, f"{sys.argv[1]}/{k}.mp4", kind)
        print("ok", kind, path, flush=True)
    except VideoError as err:
        assert "\\n" not in str(err) and path in str(err), str(err)
        print("VideoError", kind, path, flush=True)
"""


def test_the_re_encoder_of_theval_robustness_turns_every_mutant_into_a_file_or_a_video_error(tmp_path):
    """synth.reencode parses the user's GT videos: each mutant (every kind in turn) is re-encoded
    or refused with a VideoError naming it, in a child process so that a native crash is seen."""
    import subprocess
    import sys

    paths = scored_inputs(tmp_path / "videos")
    (tmp_path / "out").mkdir()
    done = subprocess.run([sys.executable, "-c", REENCODE_CHILD, str(tmp_path / "out"), *map(str, paths)],
                          capture_output=True, text=True, timeout=600)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, (f"stopped after {len(lines)} of {len(paths)} "
                                  f"(next: {paths[len(lines)] if len(lines) < len(paths) else '-'}): {done.stderr[-1500:]}")
    outcomes = [line.split()[0] for line in lines]
    assert len(outcomes) == len(paths) and set(outcomes) <= {"ok", "VideoError"}
    assert outcomes.count("ok") >= 3 and outcomes.count("VideoError") >= 3, outcomes
