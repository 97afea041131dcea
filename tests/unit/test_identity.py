"""CSIM's parts with known answers: the five-point alignment (pure/metrics/identity.py), the cosine,
and a face against itself through the (stand-in) ArcFace network. insightface's own code on the same
weights: tests/integration/test_csim_parity.py."""
import math

import numpy as np
import pytest

from theval_mesh.backends import stand_in
from theval_mesh.backends.classic import arcface
from theval_mesh.pure.metrics import identity


def test_the_template_aligns_to_itself():
    m = identity.alignment(identity.ARCFACE_DST)
    np.testing.assert_allclose(m, [[1, 0, 0], [0, 1, 0]], atol=1e-9)


def test_a_known_rotation_scale_and_shift_is_undone():
    a = math.radians(20)
    r = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    points = (2.5 * identity.ARCFACE_DST @ r.T) + [130.0, -40.0]  # the face bigger, turned, elsewhere
    m = identity.alignment(points)
    back = points @ m[:, :2].T + m[:, 2]
    np.testing.assert_allclose(back, identity.ARCFACE_DST, atol=1e-9)


def test_cosines():
    a = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    np.testing.assert_allclose(identity.cosine(a, [2.0, 0.0]), [1.0, 0.0, -1.0])


@pytest.mark.slow
def test_a_face_against_itself_is_one_and_a_darker_copy_less(tmp_path):
    stand_in.write(tmp_path, 0, models=(), classic=["arcface"])
    net = arcface.load(tmp_path)
    rng = np.random.default_rng(0)
    face = rng.integers(0, 255, (112, 112, 3), dtype=np.uint8)
    other = rng.integers(0, 255, (112, 112, 3), dtype=np.uint8)
    emb = arcface.embeddings(net, [face, face, other])
    sims = identity.cosine(emb[1:], emb[0])
    assert sims[0] == pytest.approx(1.0, abs=1e-6) and sims[1] < 0.999


def test_foreign_weights_are_refused_with_the_file_named(tmp_path):
    import torch

    from theval_mesh.pure.errors import WeightsMissing

    torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / "backbone.pth")
    with pytest.raises(WeightsMissing, match="backbone.pth is not ArcFace's iresnet100"):
        arcface.load(tmp_path)


def test_identity_drift_is_the_first_spans_csim_minus_the_last():
    """25 fps, 5 s spans: frames 0-124, 125-249, 250-... A face that fades from 0.9 to 0.6 drifts
    by the spans' means, frames without a face (left out) do not count, one span has no drift."""
    frames = np.arange(0, 300)
    cosines = np.where(frames < 125, 0.9, np.where(frames < 250, 0.8, 0.6))
    spans = identity.segment_similarities(cosines, frames, fps=25.0)
    assert spans == pytest.approx([0.9, 0.8, 0.6])
    assert identity.drift(spans) == pytest.approx(0.3)
    kept = frames % 2 == 0  # every other frame had a face
    assert identity.segment_similarities(cosines[kept], frames[kept], 25.0) == pytest.approx([0.9, 0.8, 0.6])
    assert np.isnan(identity.drift(identity.segment_similarities(cosines[:100], frames[:100], 25.0)))
    assert identity.segment_similarities(cosines, frames, fps=25.0, segment_s=10.0) == pytest.approx(
        [(0.9 * 125 + 0.8 * 125) / 250, 0.6])
