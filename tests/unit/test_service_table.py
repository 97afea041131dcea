"""The service table (services/theval_mesh/pure/services.py) holds together, and the files that
cannot import it keep its facts: docker/mesh.env's ports and docker/compose.yaml's services, row by
row. (k8s/ is checked against it in test_k8s_manifests.py, on the rendered overlays.)"""
import ast
import tomllib
from dataclasses import fields
from pathlib import Path

import yaml

from scripts import containers, images
from theval_mesh.pure.services import BY_NAME, DEPENDENCIES, SERVICES, TABLE
from theval_mesh.pure.settings import RunSettings

ROOT = Path(__file__).resolve().parents[2]
TABLE_FILE = "services/theval_mesh/pure/services.py"


def disagree(where: str, what: str, found, row, want) -> str:
    """The message of a copy that differs from the table: both values, and where each is."""
    return (f"{where}: {what} is {found!r}, but the {row} row of the service table ({TABLE_FILE}) says {want!r}: "
            "change one of them to match the other")


def test_the_table_holds_together():
    assert len(SERVICES) == len(TABLE) and SERVICES[-1] == "evaluator"
    ports = [p for s in TABLE for p in (s.port, s.metrics_port)]
    assert len(set(ports)) == len(ports), f"two services share a port: {ports}"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    settings = {f.name for f in fields(RunSettings)}
    for s in TABLE:
        assert set(s.depends_on) <= set(SERVICES) - {s.name}, f"{s.name} depends on a service not in the table"
        assert s.extra in extras, f"{s.name}: no extra {s.extra!r} in pyproject.toml [project.optional-dependencies]"
        assert set(s.settings) <= settings, f"{s.name}: not a run setting (pure/settings.py): {s.settings}"
        assert not s.roots_required or s.reads_videos, f"{s.name}: roots required, yet it reads no video"
        path = ROOT / "services" / (s.module.replace(".", "/") + ".py")
        assert path.is_file(), f"{s.name}: no module {s.module}"
        assert "register" in {f.name for f in ast.parse(path.read_text()).body if isinstance(f, ast.FunctionDef)}, \
            f"{s.name}: {s.module} has no register(config)"
    assert DEPENDENCIES == BY_NAME["evaluator"].depends_on


def test_each_service_image_is_built_from_its_extra():
    for s in TABLE:
        image = images.IMAGES.get(s.image)
        assert image is not None, f"scripts/images.py builds no image {s.image!r} for the {s.name} service"
        assert image.requirement == f"theval-mesh[{s.extra}]", (s.name, image.requirement)
    assert images.SERVICE_IMAGES == tuple(s.image for s in TABLE)


def test_mesh_env_has_the_tables_ports():
    env = containers.mesh_env()
    for s in TABLE:
        for kind, want in (("PORT", s.port), ("METRICS_PORT", s.metrics_port)):
            key = f"{s.name.upper()}_{kind}"
            assert env.get(key) == str(want), disagree("docker/mesh.env", key, env.get(key), s.name, str(want))
    ports = {k.removesuffix("_METRICS_PORT").removesuffix("_PORT").lower() for k in env if k.endswith("_PORT")}
    assert ports == set(SERVICES), f"docker/mesh.env has ports of services not in {TABLE_FILE}: {ports - set(SERVICES)}"


def test_compose_runs_each_service_of_the_table_as_its_row_says():
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    assert list(compose) == list(SERVICES), disagree("docker/compose.yaml", "the services", list(compose), "every",
                                                     list(SERVICES))
    for s in TABLE:
        spec, where = compose[s.name], f"docker/compose.yaml, service {s.name}"
        env = spec["environment"]
        want = f"theval/{s.image}:${{THEVAL_VERSION}}"
        assert spec["image"] == want, disagree(where, "image", spec["image"], s.name, want)
        for key, variable in (("THEVAL_PORT", "PORT"), ("THEVAL_METRICS_PORT", "METRICS_PORT")):
            want = f"${{{s.name.upper()}_{variable}}}"  # mesh.env's, checked above
            assert env.get(key) == want, disagree(where, key, env.get(key), s.name, want)
        # a service that requires roots does not start without them; one that reads no video takes none
        if s.roots_required or not s.reads_videos:
            assert ("THEVAL_ALLOWED_ROOTS" in env) == s.roots_required, disagree(
                where, "THEVAL_ALLOWED_ROOTS set", "THEVAL_ALLOWED_ROOTS" in env, s.name, s.roots_required)
        # it reaches each service it calls by that service's name (the one its certificate holds)
        want = {f"THEVAL_{d.upper()}_ADDR": f"{d}:${{{d.upper()}_PORT}}" for d in s.depends_on}
        found = {k: v for k, v in env.items() if k.endswith("_ADDR")}
        assert found == want, disagree(where, "the addresses", found, s.name, want)
        assert sorted(spec.get("depends_on", {})) == sorted(s.depends_on), disagree(
            where, "depends_on", sorted(spec.get("depends_on", {})), s.name, sorted(s.depends_on))
        assert sorted(spec.get("extra_hosts", [])) == sorted(f"{d}:127.0.0.1" for d in s.depends_on), where
