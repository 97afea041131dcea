"""Each mesh service process imports only what it serves, and only what its pyproject extra installs:
the deployment images install one extra each (docs/deployment.md, "Containers")."""
import importlib.metadata as md
import re

import pytest
from packaging.requirements import Requirement

from tests.support.service_imports import measure
from theval_mesh.pure.services import BY_NAME, SERVICES

# The heavy dependencies a service must not load at start-up (the models it serves load on their own).
NOT_LOADED = {
    "landmarks": {"torch", "ray", "pyiqa"},
    "headpose": {"torch", "ray", "pyiqa", "mediapipe", "cv2"},
    "quality": {"ray", "mediapipe"},
    "audio": {"torch", "ray", "pyiqa", "mediapipe", "silero_vad"},
    "evaluator": {"torch", "ray", "pyiqa", "mediapipe"},
}

# Imported when present, skipped when not (a try/except import inside the package that probes it).
PROBED = {"grpc_tools": "grpcio", "dill": "torch", "opt_einsum": "torch"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_by(extra: str) -> set[str]:
    """Distributions pip installs for `theval-mesh[extra]`: the base dependencies, the extra's,
    and theirs, recursively (as recorded in the installed metadata)."""
    seen, todo = set(), [("theval-mesh", {extra})]
    while todo:
        dist, extras = todo.pop()
        for text in md.requires(dist) or []:
            req = Requirement(text)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
                continue
            name = _norm(req.name)
            key = (name, frozenset(req.extras))
            if key in seen:
                continue
            seen.add(key)
            todo.append((req.name, set(req.extras)))
    return {name for name, _ in seen}


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_imports_only_what_it_serves_and_its_extra_installs(service):
    loaded = set(measure(service)["modules"])
    heavy = loaded & NOT_LOADED.get(service, set())
    assert not heavy, f"{service} loads {sorted(heavy)} at start-up"
    providers = md.packages_distributions()
    extra = BY_NAME[service].extra  # what its image installs
    allowed = installed_by(extra) | {"theval-mesh"}
    missing = sorted(m for m in loaded if m in providers and m not in PROBED
                     and not {_norm(d) for d in providers[m]} & allowed)
    assert not missing, f"{service} imports {missing}, which theval-mesh[{extra}] does not install"


def test_the_extras_closure_is_read_from_the_metadata():
    # The check above means something only if the closure follows extras and stops at them.
    assert "mediapipe" in installed_by("landmarks") and "mediapipe" not in installed_by("headpose")
    assert {"ray", "matplotlib"} <= installed_by("evaluator") and "torch" not in installed_by("evaluator")
