"""FAKE quality weights for tests: the published weights cannot be fetched here, so the store
holds the product's deterministic STAND-IN weights (`theval weights stand-in`, seed 0: seeded
values in the real architectures and file formats, a centre-prior face detector), written
without touching the network. Scores from them mean nothing; the loading and serving code that
reads them is the real one."""
from pathlib import Path

import pytest

from tests.support.netguard import block_network
from theval_mesh.backends import stand_in

SEED = 0


def write_fake_store(store: Path, models=None, headpose: bool = False) -> Path:
    """The stand-in files of `models` (default: every quality model; () none) and, with headpose,
    of the head-pose networks (FaceXFormer, retina-face) in `store`, without the network."""
    attempts = []
    with pytest.MonkeyPatch.context() as mp:
        block_network(mp, attempts)
        stand_in.write(store, SEED, models, headpose=headpose)
    assert not attempts, "writing the stand-in weights touched the network"
    return store
