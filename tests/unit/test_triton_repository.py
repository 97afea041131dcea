"""The Triton model repository: generated from one table, every config a valid ModelConfig."""
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from theval_mesh.backends.weights.registry import MODELS as QUALITY_MODELS
from theval_mesh.rpc.triton import repository

ROOT = Path(__file__).resolve().parents[2] / "triton_models"


def parse(path: Path) -> mc.ModelConfig:
    return text_format.Parse(path.read_text(), mc.ModelConfig())


def test_the_repository_folder_is_what_the_table_generates():
    stale = [rel for rel, text in repository.files().items()
             if not (ROOT / rel).is_file() or (ROOT / rel).read_text() != text]
    assert not stale, f"run `python -m theval_mesh.rpc.triton.repository` to regenerate: {stale}"
    on_disk = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert on_disk == set(repository.files()), "files in triton_models/ that the table does not generate"


def test_one_model_per_network_the_metrics_use():
    pyiqa = {m.pyiqa for m in repository.MODELS.values() if m.pyiqa}
    assert pyiqa == set(QUALITY_MODELS)  # topiq_iaa, topiq_nr-face, musiq, musiq-spaq
    assert repository.VAD_MODEL in repository.MODELS
    assert repository.MODELS[repository.FACEXFORMER_MODEL].python_class == "HeadPoseTritonModel"  # --headpose facexformer


@pytest.mark.parametrize("name", sorted(repository.MODELS))
def test_each_config_is_a_valid_batched_python_model(name):
    model = repository.MODELS[name]
    cpu, gpu = parse(ROOT / name / "config.pbtxt"), parse(ROOT / name / "configs" / "gpu.pbtxt")
    for config in (cpu, gpu):
        assert config.name == name and config.backend == "python"
        assert config.max_batch_size == model.max_batch_size > 0
        assert config.dynamic_batching.max_queue_delay_microseconds > 0
        assert [t.name for t in config.output][-1] == "PROVENANCE"
        if name != repository.FACEXFORMER_MODEL:  # FaceXFormer's crops are all 224x224
            assert all(t.allow_ragged_batch for t in config.input)  # each request keeps its own size
        params = {k: v.string_value for k, v in config.parameters.items()}
        assert params["weights_store"] == ""  # "" means $THEVAL_WEIGHTS, set by the deployment
        if model.pyiqa:
            assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
                ("IMAGES", mc.TYPE_UINT8, [-1, -1, 3])]
            assert (config.output[0].name, list(config.output[0].dims)) == ("SCORES", [1])
            assert params["pyiqa_metric"] == model.pyiqa
            assert params["score_each"] == ("true" if name == "topiq_nr_face" else "false")
        elif name == repository.FACEXFORMER_MODEL:
            # normalised crops as backends.headpose.facexformer.normalised() makes them; the
            # reference's batch of 128 at most
            assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
                ("CROPS", mc.TYPE_FP32, [3, 224, 224])]
            assert (config.output[0].name, config.output[0].data_type, list(config.output[0].dims)) == (
                "DEGREES", mc.TYPE_FP32, [3])
            assert config.max_batch_size == 128
        else:
            assert [(t.name, t.data_type) for t in config.input] == [("AUDIO", mc.TYPE_FP32)]
    kinds = {c.instance_group[0].kind for c in (cpu, gpu)}
    expected = {mc.ModelInstanceGroup.KIND_CPU, mc.ModelInstanceGroup.KIND_GPU} if model.gpu \
        else {mc.ModelInstanceGroup.KIND_CPU}
    assert kinds == expected
    assert (ROOT / name / "1" / "model.py").read_text().count("TritonPythonModel") == 1


def test_a_server_that_does_not_come_up_is_stopped_and_its_folder_removed(tmp_path):
    """TritonServer.start: when wait_live gives up, what spawn started is stopped (a real child
    process that never listens stands in for a tritonserver that cannot load its models in time)."""
    import sys

    from theval_mesh.rpc.triton.repository import default_repository
    from theval_mesh.rpc.triton.server import TritonServer

    class NeverLive(TritonServer):
        def command(self, backends):
            return [sys.executable, "-c", "import time; time.sleep(600)"]

    server = NeverLive(default_repository())
    with pytest.raises(RuntimeError, match="did not answer"):
        server.start(timeout=0.5)
    assert server.proc.poll() is not None, "the spawned process is still running"
    assert server._workdir is None
