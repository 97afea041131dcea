"""Our FaceXFormer (backends/headpose/facexformer_net.py) against the ORIGINAL, without it: the
original's state_dict layout and its head-pose outputs on the seed-0 stand-in weights were saved
by tests/reference_tools/facexformer_reference.py, run in the reference's venv (torch 2.6.0,
torchvision 0.21.0), into tests/data/parity/models/."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.reference_tools.facexformer_reference import random_inputs
from theval_mesh.backends import stand_in
from theval_mesh.backends.headpose import facexformer_net as fx
from theval_mesh.backends.stand_in.detectors import RETINAFACE_H5
from theval_mesh.backends.stand_in.facexformer import FACEXFORMER, SWIN_B, facexformer_state
from theval_mesh.backends.stand_in.rules import values_digest

DATA = Path(__file__).resolve().parents[1] / "data" / "parity" / "models"
# Measured ours vs original: at most 3.6e-7 rad absolute (2e-5 degrees); relative at most 1e-5,
# reached on a roll of 0.019 rad. The tolerance: 1e-5 relative, plus 1e-6 rad (6e-5 degrees)
# absolute for outputs near zero, where relative differences of float32 rounding blow up.
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def state():
    return facexformer_state(0)


@pytest.fixture(scope="module")
def reference():
    return dict(np.load(DATA / "facexformer_headpose_reference.npz"))


def _tensors(state):
    return {k: torch.from_numpy(np.array(v, order="C")) for k, v in state.items()}


def test_the_state_dict_has_the_original_keys_and_shapes():
    original = json.loads((DATA / "facexformer_keys.json").read_text())
    with torch.device("meta"):
        ours = {k: list(v.shape) for k, v in fx.FaceXFormer().state_dict().items()}
    assert list(ours) == list(original)
    assert ours == original


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_a_checkpoint_with_a_key_missing_or_extra_does_not_load(state):
    tensors = _tensors(state)
    fx.load(tensors)
    missing = dict(tensors)
    missing.pop("face_decoder.pose_token.weight")
    with pytest.raises(RuntimeError, match="Missing key"):
        fx.load(missing)
    with pytest.raises(RuntimeError, match="Unexpected key"):
        fx.load({**tensors, "face_decoder.extra.weight": torch.zeros(1)})


@pytest.mark.slow  # a few seconds: ./dev test runs it, ./dev check leaves it
def test_the_reference_was_run_on_the_weights_the_generator_makes(state, reference):
    # the committed outputs are only worth something for these exact values
    assert values_digest(state) == str(reference["model_values_sha256"])


@pytest.mark.slow
def test_the_head_pose_equals_the_originals(state, reference):
    net = fx.load(_tensors(state))
    for name, x in (("random", random_inputs()), ("real", reference["real_inputs"])):
        with torch.no_grad():
            ours = net(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(ours, reference[f"{name}_out"], rtol=RTOL, atol=ATOL, err_msg=name)
        assert ours.shape == (len(x), 3)
        assert (ours.std(0) > 1e-3).all(), f"{name}: pitch, yaw and roll vary across the inputs"


@pytest.mark.slow
def test_every_output_token_shapes_the_head_pose(state):
    """Why the head-pose path keeps all 18 decoder tokens: they attend to each other, and the image
    features attend to all of them, so another task's token moves the pose."""
    x = torch.from_numpy(random_inputs()[:1])
    with torch.no_grad():
        base = fx.load(_tensors(state))(x)
        for name in ("face_decoder.race_token.weight", "face_decoder.mask_tokens.weight"):
            net = fx.load({**_tensors(state), name: torch.zeros_like(torch.from_numpy(state[name]))})
            assert (net(x) - base).abs().max() > 1e-4, name


@pytest.mark.slow
def test_the_stand_in_values_are_reproducible(state):
    again = facexformer_state(0)
    assert values_digest(again) == values_digest(state)
    assert values_digest(facexformer_state(1)) != values_digest(state)


@pytest.mark.slow
def test_the_written_files_load_without_pickled_code(tmp_path, state):
    from torchvision.models import swin_b

    marker = stand_in.write(tmp_path, 0, models=(), reference_extras=True, headpose=True)
    assert set(marker["files"]) == {FACEXFORMER, SWIN_B, RETINAFACE_H5}
    assert marker["files"][FACEXFORMER]["values_sha256"] == values_digest(state)
    fx.load(tmp_path / FACEXFORMER)  # weights_only=True, strict
    swin = torch.load(tmp_path / SWIN_B, weights_only=True)
    swin_b(weights=None).load_state_dict(swin, strict=True)
    # the backbone init carries the values model.pt overwrites it with
    np.testing.assert_array_equal(swin["features.0.0.weight"].numpy(), state["backbone.0.0.0.weight"])
