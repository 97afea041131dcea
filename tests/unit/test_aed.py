"""FOMM's AED arithmetic (pure/metrics/aed.py) and OpenFacePytorch's cross-map LRN, known answers."""
import numpy as np
import pytest

from theval_mesh.backends.classic.openface import LRN, cross_map_lrn
from theval_mesh.pure.metrics import aed


def test_a_frames_distance_is_the_squared_euclidean_distance_of_its_embeddings():
    a, b = np.array([[0.6, 0.8]], np.float32), np.array([[0.8, 0.6]], np.float32)
    assert aed.frame_distance(a, b) == pytest.approx(0.08, rel=1e-6)  # 0.2^2 + 0.2^2, not its root
    # cmp.py takes |a - b| in the embeddings' float32, then squares in float64
    assert aed.frame_distance(a, b) == float(np.float64(np.float32(0.8) - np.float32(0.6)) ** 2 * 2)
    d = aed.embedding_distances([a, a, a], [b, a])  # the common frames only
    assert len(d) == 2 and d[1] == 0.0


def test_openfaces_lrn_window_keeps_channel_0_and_lags_its_lower_edge():
    """All ones over 8 channels: the port's running sum covers 3, 4, 5, 6, 6, 6, 5, 4 channels
    (channel 0 is never taken out, the lower edge moves one channel late), where a centred window
    of 5 would cover 3, 4, 5, 5, 5, 5, 4, 3."""
    import torch

    size, alpha, beta, k = LRN
    out = cross_map_lrn(torch.ones(1, 8, 2, 2)).numpy()[0, :, 0, 0]
    counts = np.array([3, 4, 5, 6, 6, 6, 5, 4])
    np.testing.assert_allclose(out, (k + alpha / size * counts) ** -beta, rtol=1e-6)
    assert not np.allclose(out, (k + alpha / size * np.array([3, 4, 5, 5, 5, 5, 4, 3])) ** -beta, rtol=1e-9, atol=0)


def test_a_file_that_is_not_openfaces_leaves_aed_empty_with_its_reason(tmp_path):
    import torch

    from theval_mesh.backends.classic import openface
    from theval_mesh.pure.errors import WeightsMissing

    torch.save({"layer1.weight": torch.zeros(1)}, tmp_path / "openface.pth")
    with pytest.raises(WeightsMissing, match="AED: openface is not OpenFacePytorch's openface.pth"):
        openface.load(tmp_path)
