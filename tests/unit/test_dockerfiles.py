"""docker/: the service images' Dockerfiles are what their templates make (scripts/dockerfiles.py);
every Dockerfile is hadolint-clean and shaped as the images need (wheels mounted, never copied;
non-root, health check, labels); the compose file takes its ports from mesh.env and only settings the code declares.
No engine needed: the images themselves are tested in tests/integration/test_containers.py."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scripts import containers, dockerfiles, images
from theval_mesh.rpc.config import OPTIONS

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((ROOT / "docker").glob("*.Dockerfile"))
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")


def test_every_image_has_its_dockerfile_and_no_dockerfile_is_unbuilt():
    assert {p.name.removesuffix(".Dockerfile") for p in DOCKERFILES} >= set(images.IMAGES)


def test_the_service_dockerfiles_are_made_from_their_templates():
    made = dockerfiles.generated()
    assert {p.name.removesuffix(".Dockerfile") for p in made} >= set(images.SERVICE_IMAGES)
    for path, text in made.items():
        assert path.read_text() == text, (f"docker/{path.name} is not what its template makes: edit docker/templates/ "
                                          "or the image's row in scripts/images.py instead, then run "
                                          "python scripts/dockerfiles.py")


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(path):
    done = subprocess.run([HADOLINT, "--no-color", str(path)], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_wheels_are_mounted_never_copied_and_the_user_is_not_root(path):
    text = path.read_text()
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    # One stage: BuildKit bind-mounts the wheels and the project's wheel for the installs, so no
    # layer holds a wheel and the venv is stored once (no build stage copied over).
    assert len(froms) == 1, froms
    assert re.search(r"^RUN --mount=type=bind,source=wheels,target=/wheels\b", text, re.M)
    assert not re.search(r"^COPY .*\b(wheels|project)/", text, re.M)
    name = path.name.removesuffix(".Dockerfile")
    if name != "torch":  # the project's own wheel, in a layer of its own (the dependencies' stays cached)
        assert re.search(r"^RUN --mount=type=bind,source=project,target=/project\b", text, re.M)
    image = images.IMAGES.get(name)
    if image is not None and image.parent:
        assert froms[0] == "${TORCH}" and "ARG TORCH=" in text
        assert re.findall(r"^USER (\S+)", text, re.M)[-1] == containers.CONTAINER_USER
    elif image is not None and image.own_base:  # NVIDIA's Triton image and its unprivileged user
        assert "ARG BASE=nvcr.io/nvidia/tritonserver:" in text and froms[-1] == "${BASE}"
        assert re.findall(r"^USER (\S+)", text, re.M)[-1] == "1000:1000"
    else:
        assert "ARG BASE=python:3.11-slim-bookworm" in text and froms[-1] == "${BASE}"
        assert re.findall(r"^USER (\S+)", text, re.M)[-1] == containers.CONTAINER_USER
    assert "org.opencontainers.image.version" in text
    if name != "torch":  # a runtime layer, not a server
        for label in ("revision", "source"):
            assert f"org.opencontainers.image.{label}" in text
    if name not in ("torch", "worker"):  # a Ray node is probed by KubeRay
        assert "HEALTHCHECK" in text and "theval_mesh.rpc.probe" in text
    assert "--no-cache-dir" in text and "--no-index" in text


def test_compose_ports_come_from_mesh_env_and_settings_from_the_code(tmp_path, monkeypatch):
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    text = (ROOT / "docker" / "compose.yaml").read_text()
    monkeypatch.setenv("THEVAL_WEIGHTS", str(tmp_path / "weights"))
    defined = set(containers.environment(tmp_path / "data", tmp_path / "state"))  # what `up` gives compose
    assert set(re.findall(r"\$\{(\w+)\}", text)) <= defined
    for service in containers.SERVICES:
        assert f"{service.upper()}_PORT" in defined and f"{service.upper()}_METRICS_PORT" in defined
    known = {o.env for o in OPTIONS} | {"OPENBLAS_CORETYPE"}  # numpy's BLAS kernel (mesh.env)
    for name, spec in compose["services"].items():
        assert spec["read_only"] is True and spec["network_mode"] == "host" and spec["tmpfs"] == ["/tmp"]
        assert spec["cap_drop"] == ["ALL"] and spec["restart"] == "unless-stopped"
        env = spec["environment"]
        assert set(env) <= known, set(env) - known
        assert env["THEVAL_TLS_CERT"] and env["THEVAL_TLS_KEY"]  # TLS always on
        assert ("THEVAL_TOKENS_FILE" in env) == (name == "evaluator")
        assert ("THEVAL_TLS_CLIENT_CA" in env) == (name != "evaluator")
        for mount in spec["volumes"]:
            assert mount.endswith(":ro") or name == "evaluator" and mount.endswith(":/var/lib/theval"), mount
        # its own folder of the secrets alone: its key, its certificate, the CA's (the evaluator: and the tokens)
        secrets = [m for m in spec["volumes"] if m.startswith("${THEVAL_SECRETS}")]
        assert secrets == [f"${{THEVAL_SECRETS}}/{name}:/run/secrets/theval:ro"], secrets
    # Its services, images, ports and addresses are the service table's: test_service_table.py.
