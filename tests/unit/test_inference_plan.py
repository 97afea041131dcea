"""Runtime, device and precision: decided in one place (backends.inference.plan), refused before
any work when the machine cannot honour them, named in provenance, and precision never mixed."""
import subprocess
import sys
from pathlib import Path

import pytest

from theval_mesh.backends.inference import plan as plans
from theval_mesh.core.provenance import inference
from theval_mesh.pure.errors import UsageRefused, UserError
from theval_mesh.pure.exit_codes import EXIT_USAGE
from theval_mesh.pure.inference import InferenceOptions
from theval_mesh.pure.scoring.compat import INFERENCE, differences

THEVAL = str(Path(sys.executable).parent / "theval")


def test_options_are_checked_where_they_are_given():
    assert InferenceOptions(device="CUDA:1").device == "cuda:1"
    for bad in ({"device": "gpu"}, {"device": "cuda:x"}, {"runtime": "tensorrt"}, {"precision": "int4"}):
        with pytest.raises(UsageRefused):
            InferenceOptions(**bad)


def test_auto_is_the_measured_fastest_installed_runtime_on_this_cpu():
    plan = plans.resolve(InferenceOptions())
    assert plan.device == ("cuda:0" if plans.gpus() else "cpu")
    if plan.device == "cpu":
        assert {plan.runtime(n) for n in plans.NETWORKS} == {plans.FASTEST["cpu"]["topiq_iaa"]}
    assert plans.resolve(InferenceOptions(runtime="torch")).runtime("musiq") == "torch"
    # a lower precision runs on torch's autocast, whatever auto would have chosen
    assert plans.resolve(InferenceOptions(device="cpu", precision="bf16")).runtime("musiq") == "torch"


def test_a_runtime_that_is_not_installed_falls_back_under_auto(monkeypatch):
    monkeypatch.setattr(plans, "installed", lambda name: name != "openvino")
    assert plans.resolve(InferenceOptions(device="cpu")).runtime("topiq_iaa") == "onnxruntime"
    with pytest.raises(UsageRefused, match="not installed"):
        plans.resolve(InferenceOptions(runtime="openvino", device="cpu"))


def test_what_cannot_run_is_refused_in_one_line():
    with pytest.raises(UsageRefused, match="fp32 only"):
        plans.resolve(InferenceOptions(runtime="onnxruntime", device="cpu", precision="fp16"))
    if not plans.gpus():  # this machine (and CI) has no GPU
        with pytest.raises(UsageRefused, match="no usable GPU"):
            plans.resolve(InferenceOptions(device="cuda"))
        with pytest.raises(UsageRefused, match="no usable GPU"):
            plans.check_options(InferenceOptions(device="cuda:1"))


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
@pytest.mark.skipif(plans.gpus() > 0, reason="checks the refusal on a machine without a GPU")
def test_evaluate_with_device_cuda_and_no_gpu_exits_2_before_any_work(tmp_path, clip_writer):
    run = subprocess.run([THEVAL, "evaluate", "--gt", clip_writer(tone=[0.5]), "--out", str(tmp_path / "out"), "--device", "cuda",
                          "--quality", "proxy", "--headpose", "rigid-fit", "--quiet"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == EXIT_USAGE, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--device cuda" in lines[0] and "no usable GPU" in lines[0], run.stderr
    assert not (tmp_path / "out" / "results.sqlite").exists()


def test_provenance_names_runtimes_and_devices_and_only_precision_is_compared():
    quality = {"device": "cpu", "precision": "fp32", "runtimes": {"topiq_iaa": "openvino 2026.4.1"}}
    headpose = {"device": "cpu", "precision": "fp32", "runtimes": {"facexformer": "torch 2.14.1"}}
    merged = inference(quality, headpose)
    assert merged == {"precision": "fp32", "devices": ["cpu"],
                      "runtimes": {"topiq_iaa": "openvino 2026.4.1", "facexformer": "torch 2.14.1"}}
    assert inference(None, None) is None  # proxy quality and the rigid fit: no network ran
    base = {"profile": "reference", INFERENCE: merged}
    on_torch = {"profile": "reference", INFERENCE: {**merged, "devices": ["cuda:0"],
                                                    "runtimes": {"topiq_iaa": "torch 2.14.1"}}}
    assert differences(base, on_torch) == []  # fp32 on another runtime or device: the same numbers
    bf16 = {"profile": "reference", INFERENCE: {**merged, "precision": "bf16"}}
    assert differences(base, bf16, "m") == ["network precision (--precision): GT fp32 vs m bf16"]
    assert differences({"profile": "reference"}, base) == []  # results from before: fp32


def test_exports_are_cached_where_the_process_can_write(tmp_path, monkeypatch):
    """Beside the weights; a read-only store (a mounted volume): the user's cache; a read-only
    home too (a container's read-only root): the temporary folder; THEVAL_COMPILED when set, or
    a clear error when it cannot be written."""
    from theval_mesh.backends.inference import export
    monkeypatch.delenv("THEVAL_COMPILED", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(export.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    store = tmp_path / "store"
    store.mkdir()
    assert export.cache_folder(store) == store / export.FOLDER
    (store / export.FOLDER).rmdir()
    (store / export.FOLDER).write_text("not a folder")  # as unwritable as a read-only volume, even for root
    assert export.cache_folder(store) == tmp_path / "home" / ".cache" / "theval" / "compiled"
    (tmp_path / "home" / ".cache" / "theval" / "compiled").rmdir()
    (tmp_path / "home" / ".cache" / "theval").rmdir()
    (tmp_path / "home" / ".cache").rmdir()
    (tmp_path / "home" / ".cache").write_text("not a folder")
    assert export.cache_folder(store) == tmp_path / "tmp" / "theval-compiled"
    monkeypatch.setenv("THEVAL_COMPILED", str(store / export.FOLDER / "below-a-file"))
    with pytest.raises(UserError, match="THEVAL_COMPILED"):
        export.cache_folder(store)
