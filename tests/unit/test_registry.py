"""The metric registry is the one place a metric is spelled, in the reference CSV column order,
and compute_metrics iterates it."""
import ast
import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

import theval_mesh
from theval_mesh.backends.audio.series import AudioSeries
from theval_mesh.backends.headpose.backend import HeadPose
from theval_mesh.backends.landmarks.series import LandmarkSeries
from theval_mesh.core.compute import compute_metrics
from theval_mesh.core.frame_pass import FrameSeries
from theval_mesh.pure.metrics import registry
from theval_mesh.pure.metrics.registry import GROUP_NAMES, NATURALNESS, REGISTRY, SYNCHRONIZATION
from theval_mesh.pure.scoring import names
from theval_mesh.pure.settings import RunSettings

PACKAGE = Path(theval_mesh.__file__).parent
METRICS_PAGE = PACKAGE.parents[1] / "docs" / "metrics.md"


def _docstrings(tree) -> set[int]:
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return {id(n.body[0].value) for n in nodes
            if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def spelled(source: str) -> list[tuple[int, str]]:
    """(line, string) of every string literal (docstrings and comments aside: prose may name a
    metric) that holds a metric key or display name as a word, or is a group name."""
    words = [m.key for m in REGISTRY] + [m.name for m in REGISTRY]
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(w)}(?![\w-])" for w in words))
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and (pattern.search(n.value) or n.value in GROUP_NAMES)]


def test_the_scan_finds_a_spelled_metric():
    source = ('"""Lip sync, in a docstring."""\n'
              'x = {"lip_sync": 1}  # Lip sync in a comment\n'
              'y = f"e.g. Global aesthetic={x}"\n'
              'z = ("Quality", "silent_lip", "Quality models", "lip-sync", "head_motion_paper")\n')
    assert spelled(source) == [(2, "lip_sync"), (3, "e.g. Global aesthetic="), (4, "Quality")]


def test_no_metric_is_spelled_outside_the_registry():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(registry.__file__) or path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue  # the registry itself; protoc's generated code
        found += [f"{path.relative_to(PACKAGE)}:{line}: {text!r}" for line, text in spelled(path.read_text())]
    assert not found, "use pure/metrics/registry.py instead of spelling a metric:\n" + "\n".join(found)


def _header(name: str) -> list[str]:
    with open(PACKAGE / "data" / name, newline="", encoding="utf-8-sig") as f:
        return next(csv.reader(f))


def test_the_registry_is_in_the_reference_csv_column_order():
    order = [m.name for m in REGISTRY]
    assert _header("published_gt_metrics.csv") == ["Model", *order]
    assert _header("published_leaderboard.csv") == ["Model", "Type", *order, names.FINAL]
    assert list(names.METRICS) == order and list(names.KEYS) == [m.key for m in REGISTRY]
    assert names.GROUPS == {"Quality": tuple(order[0:3]), "Naturalness": tuple(order[3:6]),
                            "Synchronization": tuple(order[6:8])}


def test_every_spelling_names_its_own_metric():
    for m in REGISTRY:  # two metrics sharing a spelling would fail here (the later one wins)
        for spelling in (m.name, m.key, *m.aliases):
            assert names.canonical_metric(spelling) == m.name, spelling
    assert len({m.key for m in REGISTRY}) == len({m.short for m in REGISTRY}) == len(REGISTRY)


def test_the_metrics_page_table_is_the_registry_s():
    table = registry.markdown_table()
    assert table.count("\n") == len(REGISTRY) + 2
    assert "| 8 | Lip sync | `lip_sync` | Synchronization | lower is better |" in table
    assert "speech covers [ratio] of the frames (under 10%)" in table
    assert table in METRICS_PAGE.read_text(encoding="utf-8"), (
        "docs/metrics.md's metric table is stale: paste the output of python -c \"from theval_mesh.pure.metrics."
        "registry import markdown_table; print(markdown_table())\"")


# ------------------------------------------------------------------ compute_metrics iterates it
def _video(frames: int, speech=None, problem=None) -> tuple:
    """A face whose points jitter over `frames` frames at 25 fps, with audio (loudness and the
    given VAD segments) unless speech is None."""
    rng = np.random.default_rng(0)
    points = 0.4 + 0.2 * rng.random((frames, 478, 3), dtype=np.float32)
    single = LandmarkSeries.from_arrays(np.arange(frames), points)
    fs = FrameSeries(256, 256, 25.0, frame_count=frames, header_frames=frames, landmarks={"single": single},
                     global_aesthetic=[5.0] * frames, face_quality=[0.5] * frames, mouth_quality=[20.0] * frames)
    angles = rng.normal(size=(5, frames))
    pose = HeadPose(*angles)
    if speech is None:
        return fs, pose, AudioSeries(problem=problem)
    times = np.arange(0, frames / 25.0, 0.05)
    return fs, pose, AudioSeries(rms=rng.random(len(times)), rms_times=times, speech=speech)


def test_every_metric_in_registry_order_with_its_own_function():
    fs, pose, audio = _video(50, speech=[(0.2, 1.0)])
    m = compute_metrics(fs, pose, audio, RunSettings())
    keys = [metric.key for metric in REGISTRY]
    assert list(m.values) == list(m.counts) == list(m.seconds) == keys
    assert all(math.isfinite(v) for v in m.values.values()) and not m.nan_reasons
    assert m.values["global_aesthetic"] == 5.0 and m.counts["global_aesthetic"] == 50
    assert m.values["head_motion"] == registry.HEAD_MOTION.function(pose.pitch, pose.yaw, pose.roll, pose.cx, pose.cy)


@pytest.mark.parametrize("problem, reason", [(None, "no audio track"),
                                             ("audio samples are NaN", "audio samples are NaN")])
def test_without_audio_the_synchronisation_metrics_say_why(problem, reason):
    m = compute_metrics(*_video(50, problem=problem), RunSettings())
    synchronisation = [metric.key for metric in REGISTRY if metric.group == SYNCHRONIZATION]
    assert m.nan_reasons == dict.fromkeys(synchronisation, reason)
    assert all(m.counts[k] == 0 for k in synchronisation)


def test_the_reasons_of_too_little_speech_and_of_no_silence():
    m = compute_metrics(*_video(50, speech=[(0.0, 0.1)]), RunSettings())  # frames 0-2 of 50
    assert m.nan_reasons == {"lip_sync": "speech covers 6% of the frames (under 10%)"}
    m = compute_metrics(*_video(50, speech=[(0.0, 2.0)]), RunSettings())
    assert m.nan_reasons == {"silent_lip_stability": "no silence of at least 0.3 s"}


def test_paper_dynamics_of_two_frames_are_nan_with_the_registry_s_reason():
    m = compute_metrics(*_video(2), RunSettings(profile="paper"))
    dynamics = [metric.key for metric in REGISTRY if metric.group == NATURALNESS]
    for key in dynamics:
        assert math.isnan(m.values[key])
        assert m.nan_reasons[key] == "needs at least 3 frames, the video has 2 with a face"
