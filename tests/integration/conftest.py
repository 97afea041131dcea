"""One synthetic kit and one evaluation of it per test run, shared by xdist's workers (real
models, proxy quality)."""
from pathlib import Path

import pytest

from tests.support.once import once_per_run, shared_folder
from theval_mesh import evaluate
from theval_mesh.synth import ALL_VARIANTS, generate_kit

KIT_CLIPS, KIT_SECONDS, KIT_SIZE = 2, 4.0, 256  # every degradation moves its metric by 5 % or more


@pytest.fixture(scope="session")
def kit():
    return once_per_run("kit", lambda: generate_kit(shared_folder("kit"), seed=7, n_clips=KIT_CLIPS,
                                                    duration_s=KIT_SECONDS, size=KIT_SIZE, variants=ALL_VARIANTS))


@pytest.fixture(scope="session")
def evaluation_out():
    return shared_folder("eval")


@pytest.fixture(scope="session")
def evaluated(kit, evaluation_out):
    """(leaderboard, per-video results) for GT against every variant."""
    def make():
        models = [(v, str(Path(kit.out_dir) / v)) for v in kit.variants]
        run = evaluate(str(Path(kit.out_dir) / "gt"), models, evaluation_out, quality="proxy", workers=2,
                       progress=False)
        return run.board, run.results
    return once_per_run("evaluated", make)


@pytest.fixture(scope="session")
def evaluated_dir(evaluated, evaluation_out) -> Path:
    """The folder that evaluation wrote (results.json, results.jsonl, ...)."""
    return evaluation_out
