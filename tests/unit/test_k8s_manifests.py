"""k8s/: both overlays and the samples render (with the installed kubectl and with kustomize v2's);
every object validates strictly against Kubernetes 1.30 and the newest schemas kubernetes-validate
has, the custom resources against their CRDs' schemas (k8s/crds/); checkov finds nothing beyond
the justified skips of checkov.yaml; and the manifests agree with the code: images built by
docker/, env variables, flags and ports the code declares, probes on ports that serve health,
metrics the code exports, the security context and the network policies docs/kubernetes.md promises.
No API server runs here: the manifests run for real in tests/integration/test_k8s_dev_overlay.py."""
import base64
import copy
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from scripts import images
from tests.support.k8s_support import (
    RENDERED,
    Network,
    Pod,
    containers_of,
    crd_schemas,
    env_of,
    kubectls,
    pod_templates,
    render,
    selects,
    workspace,
)
from tests.support.metric_names import exported_series, metric_names
from theval_mesh.commands.cli import build_parser
from theval_mesh.pure.services import BY_NAME, DEPENDENCIES, SERVICES, TABLE
from theval_mesh.pure.version import VERSION
from theval_mesh.rpc import probe
from theval_mesh.rpc.config import OPTIONS
from theval_mesh.rpc.security import is_loopback

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version())
CUSTOM = {("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob"), ("monitoring.coreos.com/v1", "ServiceMonitor"),
          ("monitoring.coreos.com/v1", "PodMonitor")}

# kubectl (the installed one and kustomize v2's 1.20) renders the manifests, checkov checks them:
# `./dev test` installs both, `./dev check` runs none of these tests.
pytestmark = pytest.mark.k8s


@pytest.fixture(scope="module")
def k8s_dir(tmp_path_factory):
    return workspace(tmp_path_factory.mktemp("k8s"))


@pytest.fixture(scope="module")
def rendered(k8s_dir) -> dict:
    return {name: render(k8s_dir, name) for name in RENDERED}


def every(rendered, kind=None):
    return [(name, o) for name, objs in rendered.items() for o in objs if kind is None or o["kind"] == kind]


def unhashed(name: str) -> str:
    return re.sub(r"-[a-z0-9]{10}$", "", name)  # generated ConfigMaps and Secrets: name-<hash>


# ------------------------------------------------------------------------------------ render, validate
def test_every_overlay_renders_the_same_with_kustomize_v2_and_the_installed_kubectl(k8s_dir, rendered):
    for label, kubectl in kubectls().items():
        for name in RENDERED:
            objs = render(k8s_dir, name, kubectl)
            assert {(o["kind"], unhashed(o["metadata"]["name"])) for o in objs} == \
                {(o["kind"], unhashed(o["metadata"]["name"])) for o in rendered[name]}, (label, name)
    kinds = {o["kind"] for _, o in every(rendered)}
    assert {"Deployment", "Service", "ServiceAccount", "PodDisruptionBudget", "ConfigMap", "Secret", "NetworkPolicy",
            "PersistentVolumeClaim", "HorizontalPodAutoscaler", "RayCluster", "RayJob", "ServiceMonitor",
            "PodMonitor", "Job"} <= kinds
    assert all(o["metadata"].get("namespace") == "theval" for _, o in every(rendered) if o["kind"] != "Namespace")


def test_every_object_validates_strictly_against_kubernetes(rendered):
    checked = 0
    for version in VERSIONS:
        for _, obj in every(rendered):
            if (obj["apiVersion"], obj["kind"]) not in CUSTOM:
                kubernetes_validate.validate(obj, version, strict=True)
                checked += 1
    assert checked > 2 * 40
    # strict: a field Kubernetes does not know is an error
    bad = copy.deepcopy(next(o for _, o in every(rendered, "Deployment")))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[0], strict=True)


def strict(schema):
    """The CRD schema with unknown fields refused (what the API server's strict field validation
    does), except where the CRD keeps unknown fields."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    return [strict(s) for s in schema] if isinstance(schema, list) else schema


def test_custom_resources_validate_against_their_crds(rendered):
    schemas = {k: strict(v) for k, v in crd_schemas().items()}
    assert CUSTOM <= set(schemas)
    seen = set()
    for _, obj in every(rendered):
        key = (obj["apiVersion"], obj["kind"])
        if key in CUSTOM:
            jsonschema.validate(obj, schemas[key])
            seen.add(key)
    assert seen == CUSTOM
    ray = copy.deepcopy(next(o for _, o in every(rendered, "RayCluster")))
    ray["spec"]["workerGroupSpecs"][0]["maxReplica"] = 3  # a typo is caught
    with pytest.raises(jsonschema.ValidationError, match="maxReplica"):
        jsonschema.validate(ray, schemas[("ray.io/v1", "RayCluster")])


def checkov() -> str:
    binary = os.environ.get("THEVAL_CHECKOV") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "theval/checkov/bin/checkov")
    assert Path(binary).is_file(), f"checkov not found at {binary}: `./dev test` installs it"
    return binary


def test_checkov_finds_nothing_beyond_the_justified_skips(rendered, tmp_path):
    config = ROOT / "checkov.yaml"
    for line in config.read_text().splitlines():
        if line.strip().startswith("- CKV"):
            assert re.search(r"#\s*\S.{20,}", line), f"no reason given: {line}"
    files = []
    for name, objs in rendered.items():
        files += ["-f", str(tmp_path / f"{name}.yaml")]
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(objs))
    for args in (files + ["--framework", "kubernetes"], ["-d", str(ROOT / "docker"), "--framework", "dockerfile"]):
        done = subprocess.run([checkov(), "--config-file", str(config), "--compact", "--quiet", "--skip-download", *args],
                              capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        passed = re.search(r"Passed checks: (\d+), Failed checks: (\d+)", done.stdout)
        assert passed and int(passed.group(1)) > 50 and passed.group(2) == "0", done.stdout[-2000:]


# ------------------------------------------------------------------------------------ agreement with the code
def test_every_image_is_one_docker_builds_at_the_project_version(rendered):
    named = set()
    for _, obj in every(rendered):
        for where, _, c in containers_of(obj):
            repo, _, tag = c["image"].partition(":")
            assert repo.startswith("theval/") and tag == VERSION, (where, c["image"])
            name = repo.removeprefix("theval/")
            assert name in images.IMAGES and (ROOT / "docker" / f"{name}.Dockerfile").is_file(), where
            named.add(name)
    assert named == set(images.SERVICE_IMAGES) | {"triton", "triton-gpu", "worker", "quality", "headpose-facexformer"}


def declared_env() -> set:
    """THEVAL_* variables the code reads: the settings' declaration and the other names its
    sources spell out (THEVAL_TOKENS, THEVAL_JOBS, ...)."""
    names = {o.env for o in OPTIONS}
    for path in (ROOT / "services" / "theval_mesh").rglob("*.py"):
        names |= set(re.findall(r"[\"'](THEVAL_[A-Z0-9_]+)[\"']", path.read_text()))
    return names


def service_of(container: dict) -> str | None:
    """The mesh server a container runs (its image's entrypoint: scripts/images.py's table, which
    knows the opt-in variants such as headpose-facexformer), if any."""
    image = images.IMAGES.get(container["image"].split(":")[0].removeprefix("theval/"))
    return None if "command" in container or image is None else image.service


def test_env_variables_and_ports_are_the_codes(rendered):
    known = declared_env()
    for name, obj in every(rendered):
        objs = rendered[name]
        for where, _, c in containers_of(obj):
            env = env_of(c, objs)
            assert {k for k in env if k.startswith("THEVAL_")} <= known, (where, set(env) - known)
            service = service_of(c)
            if service is None:
                continue
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert ports == {"grpc": int(env["THEVAL_PORT"]), "metrics": int(env["THEVAL_METRICS_PORT"])}, where
            for o in OPTIONS:  # each value parses as the settings would, and what is required is there
                if service in o.services and o.env in env:
                    text = env[o.env]
                    if o.kind in (int, float):
                        o.kind(text)
                    if o.choices:
                        assert text in o.choices, (where, o.env, text)
                assert service not in o.required or o.env in env, (where, o.env)


def services_by_name(objs) -> dict:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}


def pods_selected(objs, selector: dict) -> list[dict]:
    return [c for o in objs for _, spec, c in containers_of(o)
            if o["kind"] == "Deployment" and selector.items() <= o["spec"]["template"]["metadata"]["labels"].items()]


def test_services_and_addresses_point_at_ports_that_exist(rendered):
    for name in ("dev", "gpu"):
        objs = rendered[name]
        services = services_by_name(objs)
        for svc in services.values():
            selected = pods_selected(objs, svc["spec"]["selector"])
            assert selected, svc["metadata"]["name"]
            for port in svc["spec"]["ports"]:
                numbers = {p["containerPort"] for c in selected for p in c.get("ports", [])
                           if p["name"] == port["targetPort"]}
                assert numbers == {port["port"]}, (svc["metadata"]["name"], port)
        settings = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("theval-settings"))
        addresses = {k: v for k, v in settings["data"].items() if k.endswith("_ADDR") or k == "THEVAL_TRITON_URL"}
        assert len(addresses) == 5, addresses
        for key, address in addresses.items():
            host, port = address.rsplit(":", 1)
            grpc = {p["port"] for p in services[host]["spec"]["ports"] if p["name"] == "grpc"}
            assert grpc == {int(port)}, (name, key, address)


def test_each_service_is_deployed_as_its_row_of_the_service_table_says(rendered):
    """The manifests keep copies of the service table (services/theval_mesh/pure/services.py): each
    row's Deployment and Service (k8s/base/NAME.yaml) with its image and ports, the addresses of the
    services it calls (k8s/base/settings.env), its image's tag (k8s/base/kustomization.yaml)."""
    def disagree(where, what, found, row, want):
        return (f"{where}: {what} is {found!r}, but the {row} row of the service table "
                f"(services/theval_mesh/pure/services.py) says {want!r}: change one of them to match the other")

    for name in ("dev", "gpu"):
        objs = rendered[name]
        deployments = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}
        services = services_by_name(objs)
        served = {service_of(c) for o in deployments.values() for _, _, c in containers_of(o)} - {None}
        assert served == set(SERVICES), disagree(f"k8s/ ({name})", "the services deployed", sorted(served), "every",
                                                 sorted(SERVICES))
        for s in TABLE:
            where = f"k8s/base/{s.name}.yaml ({name} overlay)"
            assert s.name in deployments and s.name in services, f"{where}: no Deployment and Service {s.name}"
            (c,) = [c for c in deployments[s.name]["spec"]["template"]["spec"]["containers"] if c["name"] == s.name]
            assert service_of(c) == s.name, disagree(where, "the image", c["image"], s.name, f"theval/{s.image}")
            env, ports = env_of(c, objs), {p["name"]: p["containerPort"] for p in c["ports"]}
            for port, variable, want in (("grpc", "THEVAL_PORT", s.port), ("metrics", "THEVAL_METRICS_PORT",
                                                                          s.metrics_port)):
                assert ports.get(port) == want, disagree(where, f"containerPort {port}", ports.get(port), s.name, want)
                assert env.get(variable) == str(want), disagree(where, variable, env.get(variable), s.name, str(want))
                found = {p["port"] for p in services[s.name]["spec"]["ports"] if p["name"] == port}
                assert found == {want}, disagree(where, f"the Service's {port} port", found, s.name, {want})
            for d in s.depends_on:
                key, want = f"THEVAL_{d.upper()}_ADDR", f"{d}:{BY_NAME[d].port}"
                assert env.get(key) == want, disagree("k8s/base/settings.env", key, env.get(key), d, want)
    tagged = {i["name"] for i in yaml.safe_load((ROOT / "k8s" / "base" / "kustomization.yaml").read_text())["images"]}
    for s in TABLE:
        assert f"theval/{s.image}" in tagged, f"k8s/base/kustomization.yaml: no tag for theval/{s.image} ({s.name})"


def test_commands_and_flags_exist(rendered):
    from theval_mesh.rpc.triton.server import bundled_root, environment
    root = bundled_root()
    helped = subprocess.run([str(root / "bin" / "tritonserver"), "--help"], capture_output=True, text=True,
                            env=environment(root))
    triton_flags = set(re.findall(r"--[a-z0-9-]+", helped.stdout + helped.stderr))
    assert "--grpc-use-ssl-mutual" in triton_flags
    seen = set()
    for _, obj in every(rendered):
        for where, _, c in containers_of(obj):
            argv = c.get("command", []) + c.get("args", [])
            if not argv:
                continue
            seen.add(argv[0])
            if argv[0] == "theval":
                try:
                    build_parser(argv[1]).parse_args(argv[1:])
                except SystemExit:
                    pytest.fail(f"{where}: `{' '.join(argv)}` is not a command theval takes")
            elif argv[0] == "tritonserver":
                flags = {a.split("=")[0] for a in argv[1:]}
                assert flags <= triton_flags, (where, flags - triton_flags)
            elif argv[0] == "bash":  # the RayJob's entrypoint is a string; its theval commands:
                pass
            else:
                pytest.fail(f"{where}: unexpected command {argv}")
    assert seen == {"theval", "tritonserver"}
    rayjob = next(o for _, o in every(rendered, "RayJob"))
    for line in re.findall(r"theval bulk [^;|]+", rayjob["spec"]["entrypoint"]):
        words = [w.strip('"') for w in line.split()][1:]
        words = ["$id" if w.startswith("$id") or w.startswith("/var/lib/theval/jobs/results") else w for w in words]
        try:
            build_parser("bulk").parse_args(words)
        except SystemExit:
            pytest.fail(f"RayJob entrypoint: `{line}` is not a command theval takes")


def test_probes_ask_ports_that_serve_health(rendered):
    for name, obj in every(rendered):
        objs = rendered[name]
        for where, spec, c in containers_of(obj):
            if c in spec.get("initContainers", []) or obj["kind"] in ("Job", "RayJob"):
                continue  # they run to completion
            env = env_of(c, objs)
            kinds = ("readinessProbe", "livenessProbe") + (("startupProbe",) if obj["kind"] == "Deployment" else ())
            for kind in kinds:
                command = c[kind]["exec"]["command"]
                assert command[:3] == ["python", "-m", "theval_mesh.rpc.probe"], (where, kind)
                mode = command[3:]
                assert mode in probe.MODES, (where, kind, mode)
                if mode in ([], ["--live"]):  # gRPC health on THEVAL_PORT: the container's grpc port
                    assert service_of(c) and int(env["THEVAL_PORT"]) == next(
                        p["containerPort"] for p in c["ports"] if p["name"] == "grpc"), where
                elif mode == ["--triton"]:  # Triton's HTTP endpoint, where the server was told to put it
                    argv = " ".join(c.get("command", []) + c.get("args", []))
                    port = re.search(r"--http-port[= ](\d+)", argv).group(1)
                    assert env["THEVAL_TRITON_HTTP_PORT"] == port, where
                elif mode == ["--front"]:  # Triton's front: its grpc port, and the pod's Triton behind it
                    assert c["command"][:3] == ["theval", "triton", "front"], where
                    assert int(env["THEVAL_TRITON_GRPC_PORT"]) == next(
                        p["containerPort"] for p in c["ports"] if p["name"] == "grpc"), where
                    triton = next(t for t in spec["containers"] if t["name"] == "triton")
                    port = re.search(r"--http-port[= ](\d+)", " ".join(triton.get("command", []) + triton.get("args", [])))
                    assert env["THEVAL_TRITON_HTTP_PORT"] == port.group(1), where
                else:
                    assert obj["kind"] == "RayCluster", where
            assert c["readinessProbe"]["exec"]["command"][3:] != ["--live"], f"{where}: readiness is SERVING"
            if obj["kind"] == "Deployment" and service_of(c):
                assert c["livenessProbe"]["exec"]["command"][3:] == ["--live"], f"{where}: NOT_SERVING is alive"


def test_every_metric_the_autoscaling_uses_is_exported(rendered, tmp_path):
    adapter = yaml.safe_load((ROOT / "k8s" / "prometheus-adapter" / "values.yaml").read_text())
    exported = exported_series(tmp_path)
    served = set()
    for rule in adapter["rules"]["custom"]:
        query = rule["metricsQuery"].replace("<<.LabelMatchers>>", 'x="y"').replace("<<.GroupBy>>", "pod")
        assert metric_names(query) | metric_names(rule["seriesQuery"]) <= exported, rule
        served.add(rule["name"]["as"])
    hpas = [o for _, o in every(rendered, "HorizontalPodAutoscaler")]
    assert {o["spec"]["scaleTargetRef"]["name"] for o in hpas} == {"landmarks", "quality", "evaluator"}
    for hpa in hpas:
        used = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
        assert used and used <= served, hpa["metadata"]["name"]
        assert any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"])


def test_the_evaluators_metric_counts_the_scoring_methods_it_serves():
    from theval_mesh.rpc.v1 import evaluator_pb2
    adapter = yaml.safe_load((ROOT / "k8s" / "prometheus-adapter" / "values.yaml").read_text())
    rule, = [r for r in adapter["rules"]["custom"] if r["name"]["as"] == "theval_in_flight_evaluations"]
    service = evaluator_pb2.DESCRIPTOR.services_by_name["EvaluatorService"]
    methods = re.search(r'method=~"([^"]+)"', rule["metricsQuery"]).group(1)
    counted = {m.name for m in service.methods if re.fullmatch(methods, f"/{service.full_name}/{m.name}")}
    assert counted == {"Evaluate", "EvaluateStream"}


def test_an_evaluator_on_sqlite_is_one_pod_and_one_on_postgresql_scales(rendered):
    """SQLite has one writer: an overlay that keeps the store in a file runs one evaluator pod,
    replaced with Recreate, its HPA held at one; one on PostgreSQL rolls and scales."""
    for name in ("dev", "gpu"):
        objs = {(o["kind"], o["metadata"]["name"]): o for o in rendered[name]}
        evaluator = objs[("Deployment", "evaluator")]
        hpa = objs[("HorizontalPodAutoscaler", "evaluator")]["spec"]
        env = {e["name"]: e for e in evaluator["spec"]["template"]["spec"]["containers"][0]["env"]}
        store = env["THEVAL_STORE"]
        if "valueFrom" in store:  # the theval-store Secret's URL
            ref = store["valueFrom"]["secretKeyRef"]
            assert (unhashed(ref["name"]), ref["key"]) == ("theval-store", "url")
            assert "PGPASSWORD" in env and evaluator["spec"]["strategy"]["type"] == "RollingUpdate"
            assert hpa["minReplicas"] >= 2 and hpa["maxReplicas"] > hpa["minReplicas"], name
        else:
            assert store["value"].endswith(".sqlite") and "PGPASSWORD" not in env
            assert evaluator["spec"]["replicas"] == 1 and evaluator["spec"]["strategy"] == {"type": "Recreate"}
            assert hpa["minReplicas"] == hpa["maxReplicas"] == 1, name
    assert "valueFrom" in env["THEVAL_STORE"]  # gpu, the production overlay, scales


def test_every_metrics_port_is_scraped(rendered):
    for name in ("dev", "gpu"):
        objs = rendered[name]
        monitors = [o for o in objs if o["kind"] == "ServiceMonitor"]
        for svc in services_by_name(objs).values():
            if any(p["name"] == "metrics" for p in svc["spec"]["ports"]):
                labels = svc["metadata"].get("labels", {})
                assert any(m["spec"]["selector"]["matchLabels"].items() <= labels.items()
                           and any(e["port"] == "metrics" for e in m["spec"]["endpoints"]) for m in monitors), \
                    (name, svc["metadata"]["name"])
        ray = next(o for o in objs if o["kind"] == "RayCluster")
        pod_monitor = next(o for o in objs if o["kind"] == "PodMonitor")
        for _, _, c in containers_of(ray):
            assert any(p["name"] == "metrics" for p in c["ports"])
        assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= \
            ray["spec"]["headGroupSpec"]["template"]["metadata"]["labels"].items()


def test_pods_run_unprivileged_with_a_read_only_root(rendered):
    for _, obj in every(rendered):
        for where, spec, c in containers_of(obj):
            pod = spec["securityContext"]
            assert pod["runAsNonRoot"] and pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert pod["runAsUser"] == (1000 if c["image"].startswith("theval/triton-gpu") else 10001), where
            assert spec["automountServiceAccountToken"] is False, where
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert c["resources"]["requests"] and c["resources"]["limits"], where


# ------------------------------------------------------------------------------------ GPUs
GPU = "nvidia.com/gpu"
GPU_NODES = {"nvidia.com/gpu.present": "true"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def main_container(objs: list[dict], name: str) -> tuple[dict, dict]:
    """(pod spec, container) of the Deployment `name`: its container of the same name."""
    deployment = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == name)
    spec = deployment["spec"]["template"]["spec"]
    return spec, next(c for c in spec["containers"] if c["name"] == name)


def gpus(container: dict) -> dict:
    """{"requests"|"limits": count} of the GPUs a container asks for."""
    return {k: str(v[GPU]) for k, v in container.get("resources", {}).items() if GPU in v}


def on_a_gpu(spec: dict, c: dict) -> bool:
    """Whether the container asks for a GPU or its pod for a GPU node."""
    return bool(gpus(c) or GPU_TOLERATION in spec.get("tolerations", [])
                or set(GPU_NODES) & set(spec.get("nodeSelector", {})))


def test_the_gpu_overlay_gives_quality_and_headpose_a_gpu_of_their_own(rendered):
    """overlays/gpu: besides Triton (the quality models), the quality pods (their face detector,
    facexlib) and the head-pose pods (RetinaFace and FaceXFormer) each take one GPU on a GPU node
    and run there with THEVAL_DEVICE=cuda, set in their own container, never in the ConfigMap
    that every pod reads (a CPU-only pod must not ask for CUDA)."""
    objs = rendered["gpu"]
    for name in ("triton", "quality", "headpose"):
        spec, c = main_container(objs, name)
        assert gpus(c) == {"requests": "1", "limits": "1"}, (name, c["resources"])
        assert GPU_NODES.items() <= spec.get("nodeSelector", {}).items(), (name, spec.get("nodeSelector"))
        assert GPU_TOLERATION in spec.get("tolerations", []), (name, spec.get("tolerations"))
    for name in ("quality", "headpose"):
        _, c = main_container(objs, name)
        assert env_of(c, objs)["THEVAL_DEVICE"] == "cuda", name
        assert {"name": "THEVAL_DEVICE", "value": "cuda"} in c["env"], name
    holders = set()
    for overlay in ("dev", "gpu"):
        settings = next(o for o in rendered[overlay]
                        if o["kind"] == "ConfigMap" and unhashed(o["metadata"]["name"]) == "theval-settings")
        assert "THEVAL_DEVICE" not in settings["data"], overlay
    for overlay, obj in every(rendered):
        for where, spec, c in containers_of(obj):
            if gpus(c):
                holders.add((overlay, where))
            if env_of(c, rendered[overlay]).get("THEVAL_DEVICE", "auto").startswith("cuda"):
                assert gpus(c).get("limits") == "1" and GPU_TOLERATION in spec.get("tolerations", []), (overlay, where)
    assert holders == {("gpu", "triton/triton"), ("gpu", "quality/quality"), ("gpu", "headpose/headpose")}


def test_tritons_grpc_beyond_its_pod_is_its_front_in_every_overlay(rendered):
    """Triton's own TLS admits any certificate of the CA: the port the mesh dials is the front's
    (rpc.triton.front, the caller check). The dev overlay's `theval triton up` runs the front
    itself; the GPU overlay runs NVIDIA's tritonserver with gRPC on the pod's loopback and
    `theval triton front` beside it, on the port the Service names."""
    for overlay in ("dev", "gpu"):
        objs = rendered[overlay]
        deployment = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "triton")
        containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
        serving = [c for c in containers.values() if any(p["name"] == "grpc" for p in c.get("ports", []))]
        assert len(serving) == 1, overlay
        argv = " ".join(serving[0].get("command", []) + serving[0].get("args", []))
        assert argv.startswith(("theval triton up", "theval triton front")), (overlay, argv)
        assert env_of(serving[0], objs)["THEVAL_TLS_CLIENT_CA"], overlay
        if overlay == "gpu":
            server = " ".join(containers["triton"]["args"])
            assert "--grpc-address=127.0.0.1" in server and "--http-address=127.0.0.1" in server
            assert "ssl" not in server  # plaintext, on the pod's loopback only
            backend = re.search(r"--grpc-port=(\d+)", server).group(1)
            assert serving[0]["command"][-2:] == ["--backend", f"127.0.0.1:{backend}"]


def test_the_gpu_overlays_headpose_serves_facexformer_in_process_from_the_weights_store(rendered):
    """The FaceXFormer image (THEVAL_HEADPOSE=auto: FaceXFormer when model.pt and retinaface.h5 are
    in the store, the rigid fit otherwise) with the weights claim at THEVAL_WEIGHTS and the videos
    at THEVAL_ALLOWED_ROOTS (it decodes them); its network in process on its GPU, not on Triton,
    whose port the policies open to quality and audio alone. Quality's models stay on Triton."""
    objs = rendered["gpu"]
    spec, c = main_container(objs, "headpose")
    env = env_of(c, objs)
    assert c["image"] == f"theval/headpose-facexformer:{VERSION}" and service_of(c) == "headpose"
    assert env["THEVAL_HEADPOSE"] == "auto" and env["THEVAL_BACKEND"] == "inprocess"
    claims = {v["name"]: v["persistentVolumeClaim"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    mounts = {m["mountPath"]: (claims.get(m["name"]), m.get("readOnly")) for m in c["volumeMounts"]}
    assert mounts[env["THEVAL_WEIGHTS"]] == ({"claimName": "theval-weights", "readOnly": True}, True)
    for root in env["THEVAL_ALLOWED_ROOTS"].split(os.pathsep):
        assert mounts[root] == ({"claimName": "theval-data", "readOnly": True}, True), root
    net = Network(objs)
    assert not net.allows(net.pod("headpose"), net.pod("triton"), "grpc")
    _, quality = main_container(objs, "quality")
    assert env_of(quality, objs)["THEVAL_BACKEND"] == "triton"
    assert net.allows(net.pod("quality"), net.pod("triton"), "grpc")


def test_the_dev_overlay_and_base_take_no_gpu(rendered, k8s_dir):
    """CPU only: no container of base or overlays/dev asks for a GPU, a GPU node or CUDA; the
    head-pose service there is the rigid fit's image (no torch)."""
    from scripts import k8s
    for label, objs in (("base", k8s.render(k8s_dir / "base")), ("dev", rendered["dev"])):
        settings = next(o for o in objs
                        if o["kind"] == "ConfigMap" and unhashed(o["metadata"]["name"]) == "theval-settings")
        assert "THEVAL_DEVICE" not in settings["data"], label
        for obj in objs:
            for where, spec, c in containers_of(obj):
                assert not on_a_gpu(spec, c), (label, where)
                assert "THEVAL_DEVICE" not in {e["name"] for e in c.get("env", [])}, (label, where)
        for name in ("quality", "headpose"):
            _, c = main_container(objs, name)
            assert not {GPU} & (set(c["resources"]["requests"]) | set(c["resources"]["limits"])), (label, name)
        assert main_container(objs, "headpose")[1]["image"] == f"theval/headpose:{VERSION}", label


# ------------------------------------------------------------------------------------ the network
def with_samples(rendered, name: str) -> list[dict]:
    """An overlay's objects and the samples', applied after it into its namespace."""
    return rendered[name] + rendered["samples"]


def test_every_pod_is_denied_all_but_paths_of_its_own(rendered):
    """A default deny of both directions, and each pod selected by a policy that says what it
    may open (egress) beyond it."""
    for name in ("dev", "gpu"):
        objs = with_samples(rendered, name)
        policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
        deny = [p["spec"] for p in policies if p["spec"]["podSelector"] == {}
                and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}]
        assert deny == [{"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}], name
        for o in objs:
            for where, template in pod_templates(o):
                own = [p["metadata"]["name"] for p in policies if p["spec"]["podSelector"]
                       and "Egress" in p["spec"]["policyTypes"] and selects(p["spec"]["podSelector"],
                                                                             template["metadata"]["labels"])]
                assert own, f"{name}: {where} is selected by no egress policy of its own"


def test_no_policy_admits_from_everywhere(rendered):
    """Every ingress rule names its sources by labels: no rule without `from`, no empty selector
    (every pod or namespace), no address range."""
    for name, p in every(rendered, "NetworkPolicy"):
        for rule in p["spec"].get("ingress", []):
            assert rule.get("from"), (name, p["metadata"]["name"], rule)
            for peer in rule["from"]:
                assert "ipBlock" not in peer, (name, p["metadata"]["name"], peer)
                assert all(selector and (selector.get("matchLabels") or selector.get("matchExpressions"))
                           for selector in peer.values()), (name, p["metadata"]["name"], peer)


def test_the_mesh_paths_are_open_and_nothing_else(rendered):
    """Who may connect to whom on which port, by the rendered policies (tests/support/k8s_support.py
    Network): the mesh's paths, and a sample of what must stay closed."""
    for name in ("dev", "gpu"):
        net = Network(with_samples(rendered, name))
        pod = net.pod
        evaluator, triton = pod("evaluator"), pod("triton")
        head, worker = pod("theval-ray head"), pod("theval-ray bulk")
        services = [pod(s) for s in DEPENDENCIES]
        submitter, fetch = pod("theval-bulk submitter"), pod("theval-weights-fetch")
        dns = net.outside("kube-system", ports=(53,), **{"k8s-app": "kube-dns"})
        operator = net.outside("kuberay", **{"app.kubernetes.io/name": "kuberay-operator"})
        prometheus = net.outside("monitoring", **{"app.kubernetes.io/name": "prometheus"})
        client = Pod("a client", {}, {"kubernetes.io/metadata.name": "apps", "theval.io/evaluator-client": "true"}, {})
        stranger = net.outside("default", ports=(443, 5432, 6443))  # any other pod, or any address
        everyone = [evaluator, head, worker, triton, submitter, fetch, *services]
        opened = [(client, evaluator, "grpc"), (evaluator, head, "client"), (head, evaluator, "grpc"),
                  (worker, evaluator, "grpc"), (worker, head, "gcs"), (head, worker, 20000), (worker, worker, 20000),
                  (pod("quality"), triton, "grpc"), (pod("audio"), triton, "grpc"), (operator, head, "dashboard"),
                  (submitter, head, "dashboard"), (head, stranger, 6443), (fetch, stranger, 443)]
        opened += [(evaluator, s, "grpc") for s in services]
        opened += [(prometheus, p, "metrics") for p in everyone if "metrics" in p.ports]
        opened += [(p, dns, 53) for p in everyone]
        closed = [(stranger, evaluator, "grpc"), (stranger, head, "client"), (stranger, head, "gcs"),
                  (stranger, head, "dashboard"), (evaluator, head, "gcs"), (evaluator, head, "dashboard"),
                  (submitter, head, "gcs"), (submitter, evaluator, "grpc"),
                  (pod("landmarks"), triton, "grpc"), (evaluator, triton, "grpc"), (worker, triton, "grpc"),
                  (worker, stranger, 6443), (triton, stranger, 443), (prometheus, evaluator, "grpc")]
        closed += [(worker, s, "grpc") for s in services] + [(head, s, "grpc") for s in services]
        closed += [(s, evaluator, "grpc") for s in services] + [(s, head, "client") for s in services]
        closed += [(p, stranger, 443) for p in everyone if p not in (fetch, head)]  # head: the Kubernetes API
        closed += [(p, stranger, 5432) for p in everyone if p is not evaluator or name == "dev"]  # dev: SQLite
        for src, dst, port in opened:
            assert net.allows(src, dst, port), f"{name}: {src.where} -> {dst.where}:{port} is closed"
        for src, dst, port in closed:
            assert not net.allows(src, dst, port), f"{name}: {src.where} -> {dst.where}:{port} is open"
        assert all(net.allows(p, dns, 53, "UDP") for p in everyone)
        assert net.allows(evaluator, stranger, 5432) == (name == "gpu")  # its PostgreSQL store


def test_named_ports_of_the_policies_exist_where_they_point(rendered):
    for name in ("dev", "gpu"):
        objs = with_samples(rendered, name)
        net = Network(objs)
        for p in (o for o in objs if o["kind"] == "NetworkPolicy"):
            targets = [q for q in net.pods.values() if selects(p["spec"]["podSelector"], q.labels)]
            rules = [(rule, targets) for rule in p["spec"].get("ingress", [])]
            rules += [(rule, [q for q in net.pods.values() if any(net.peer_matches(peer, q) for peer in rule["to"])])
                      for rule in p["spec"].get("egress", []) if "to" in rule]
            for rule, pods in rules:
                for port in (x["port"] for x in rule.get("ports", []) if isinstance(x.get("port"), str)):
                    assert any(port in q.ports for q in pods), (name, p["metadata"]["name"], port)


def test_the_evaluators_jobs_reach_the_ray_head_and_come_back_by_a_name_its_certificate_bears(rendered):
    """THEVAL_RAY_ADDRESS is the head's Ray Client port (a driver by the GCS address needs a
    raylet where it runs); the jobs' actors dial the evaluator's pod IP (a job's token is known to
    its pod only) and check the certificate for a name it bears."""
    from cryptography import x509
    for name in ("dev", "gpu"):
        objs = rendered[name]
        settings = next(o for o in objs
                        if o["kind"] == "ConfigMap" and unhashed(o["metadata"]["name"]) == "theval-settings")
        ray = next(o for o in objs if o["kind"] == "RayCluster")
        client_port = next(p["containerPort"] for c in ray["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
                           for p in c["ports"] if p["name"] == "client")
        assert settings["data"]["THEVAL_RAY_ADDRESS"] == f"ray://{ray['metadata']['name']}-head-svc:{client_port}"
        deployment = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "evaluator")
        spec = deployment["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        declared = {e["name"]: e for e in container["env"]}
        assert declared["THEVAL_ADVERTISE_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        env = env_of(container, objs)
        cert = x509.load_pem_x509_certificate(mounted_file(objs, spec, container, env["THEVAL_TLS_CERT"]))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
        assert env["THEVAL_ADVERTISE_TLS_NAME"] in names, (name, names)


def mounted_file(objs: list[dict], spec: dict, container: dict, path: str) -> bytes:
    """The content of a file a container sees in a Secret volume."""
    import base64
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"].rstrip("/") + "/"))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    secret = next(o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == volume["secret"]["secretName"])
    return base64.b64decode(secret["data"][path[len(mount["mountPath"].rstrip("/")) + 1:]])


def test_ray_requires_its_token_from_a_secret_everywhere(rendered):
    """Ray's token authentication on the cluster (KubeRay's authOptions: it gives the token to what
    it adds, and uses it on the dashboard), in the Ray containers and the evaluator (its jobs'
    drivers), always from the theval-ray-token Secret; no token or password is a plain value."""
    for name in ("dev", "gpu"):
        objs = rendered[name]
        ray = next(o for o in objs if o["kind"] == "RayCluster")
        auth = ray["spec"].get("authOptions", {})
        assert auth.get("mode") == "token" and unhashed(auth.get("secretName", "")) == "theval-ray-token", name
        secret = next(o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == auth["secretName"])
        assert len(env_of({"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": auth["secretName"],
                                                                                   "key": "auth_token"}}}]},
                          objs)["T"]) >= 32 and set(secret["data"]) == {"auth_token"}
        evaluator = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "evaluator")
        users = [(where, c) for where, spec, c in containers_of(ray) if c in spec["containers"]]
        users += [("evaluator", evaluator["spec"]["template"]["spec"]["containers"][0])]
        assert len(users) == 3
        for where, c in users:
            env = {e["name"]: e for e in c.get("env", [])}
            assert env.get("RAY_AUTH_MODE", {}).get("value") == "token", (name, where)
            assert env.get("RAY_AUTH_TOKEN", {}).get("valueFrom") == {
                "secretKeyRef": {"name": auth["secretName"], "key": "auth_token"}}, (name, where)
        # The dashboard listens beyond loopback for the KubeRay operator (RayJobs): behind the token.
        head = ray["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        # The Ray Client server's forks (ray-project/ray#63202): without gRPC's fork handlers.
        assert {e["name"]: e.get("value") for e in head["env"]}.get("GRPC_ENABLE_FORK_SUPPORT") == "false", name
        host = ray["spec"]["headGroupSpec"]["rayStartParams"].get("dashboard-host", "0.0.0.0")  # KubeRay's default
        assert is_loopback(host) or auth["mode"] == "token"
    for name, obj in every(rendered):
        for where, _, c in containers_of(obj):
            for e in c.get("env", []):
                if re.search(r"TOKEN|PASSWORD|SECRET", e["name"]):
                    assert "value" not in e, f"{name}: {where}: {e['name']} is a plain value"


def test_only_the_autoscaler_gets_a_kubernetes_api_token(rendered):
    """The head's autoscaler scales the worker group through the Kubernetes API: a projected
    service account token goes to its container alone, never to the Ray containers (they run
    the jobs' code); no pod mounts one otherwise."""
    for name in ("dev", "gpu"):
        ray = next(o for o in rendered[name] if o["kind"] == "RayCluster")
        (mount,) = ray["spec"]["autoscalerOptions"]["volumeMounts"]
        assert mount == {"name": mount["name"], "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                         "readOnly": True}
        head = ray["spec"]["headGroupSpec"]["template"]["spec"]
        volume = next(v for v in head["volumes"] if v["name"] == mount["name"])
        assert any("serviceAccountToken" in source for source in volume["projected"]["sources"])
        for where, spec, c in containers_of(ray):
            assert mount["name"] not in {m["name"] for m in c.get("volumeMounts", [])}, where
            assert spec["automountServiceAccountToken"] is False, where


def test_the_job_store_is_mounted_where_a_rayjobs_driver_runs_alone(rendered):
    """A RayJob's entrypoint runs on the Ray head: `theval bulk submit` there plans the job from
    the folders below /data and is the job store's only writer. The workers mount neither the
    store nor anything writable of it; the evaluator's jobs keep their store in its pod."""
    rayjob = next(o for _, o in every(rendered, "RayJob"))
    assert "--store" not in rayjob["spec"]["entrypoint"]  # the head's THEVAL_JOBS
    assert re.search(r"--gt /data/", rayjob["spec"]["entrypoint"])
    for name in ("dev", "gpu"):
        ray = next(o for o in rendered[name] if o["kind"] == "RayCluster")
        holders = []
        for where, template in pod_templates(ray):
            claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in template["spec"]["volumes"]
                      if "persistentVolumeClaim" in v}
            for c in template["spec"]["containers"]:
                mounted = {claims.get(m["name"]): m for m in c.get("volumeMounts", [])}
                if "theval-jobs" in mounted:
                    holders.append(where)
                    env = {e["name"]: e.get("value") for e in c["env"]}
                    assert env["THEVAL_JOBS"].startswith(mounted["theval-jobs"]["mountPath"] + "/")
                if "theval-data" in mounted:
                    assert mounted["theval-data"].get("readOnly") is True, where
        assert holders == ["theval-ray head"], (name, holders)


def test_the_ray_cluster_scales_bulk_scoring_from_zero(rendered):
    for name in ("dev", "gpu"):
        ray = next(o for o in rendered[name] if o["kind"] == "RayCluster")
        assert ray["spec"]["enableInTreeAutoscaling"] is True
        assert ray["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # scoring goes to workers
        (group,) = ray["spec"]["workerGroupSpecs"]
        assert group["minReplicas"] == 0 < group["maxReplicas"]
        assert ray["spec"]["rayVersion"] == __import__("ray").__version__


# ------------------------------------------------------------------------------------ TLS material
IDENTITIES = SERVICES + ("triton",)


def public_key(pem: bytes) -> bytes:
    """The public key of a PEM certificate or private key, DER."""
    if b"PRIVATE KEY" in pem:
        key = serialization.load_pem_private_key(pem, None)
    else:
        key = x509.load_pem_x509_certificate(pem)
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def dns_names(pem: bytes) -> set:
    san = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName))


def test_each_pod_mounts_its_own_key_alone_and_no_secret_holds_the_cas_key(rendered, k8s_dir):
    """One Secret per identity (its key, its certificate, the CA's certificate), mounted by that
    Deployment's container alone; the tokens only in the evaluator; the CA's key in no Secret and
    not beside the manifests. The services verify the evaluator's client certificate against the
    mounted CA, and each address a caller uses names the Service that the callee's certificate holds."""
    for name in ("dev", "gpu"):
        objs = rendered[name]
        secrets = {o["metadata"]["name"]: {k: base64.b64decode(v) for k, v in o["data"].items()}
                   for o in objs if o["kind"] == "Secret"}
        (ca,) = {data["ca.crt"] for data in secrets.values() if "ca.crt" in data}
        for data in secrets.values():
            for key, value in data.items():
                assert b"PRIVATE KEY" not in value or public_key(value) != public_key(ca), (name, key)
        keys, certificates = {}, {}
        for obj in objs:
            for where, spec, c in containers_of(obj):
                volumes = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
                mounted = {m["mountPath"]: volumes[m["name"]] for m in c.get("volumeMounts", []) if m["name"] in volumes}
                referenced = {unhashed(e["valueFrom"]["secretKeyRef"]["name"]) for e in c.get("env", [])
                              if "secretKeyRef" in e.get("valueFrom", {})}
                identity = obj["metadata"]["name"]
                if obj["kind"] != "Deployment" or c in spec.get("initContainers", []):
                    # Ray's nodes have Ray's token (Ray's own authentication), no TLS material
                    assert not mounted and referenced <= {"theval-ray-token"}, (name, where)
                    continue
                assert identity in IDENTITIES and [unhashed(s) for s in mounted.values()] == [f"theval-tls-{identity}"], \
                    (name, where, mounted)
                # the evaluator: its tokens, its store, and Ray's token for the drivers of its jobs
                assert referenced <= ({"theval-tokens", "theval-store", "theval-ray-token"} if identity == "evaluator"
                                      else set()), where
                (folder, secret), = mounted.items()
                data = secrets[secret]
                assert set(data) == {"tls.crt", "tls.key", "ca.crt"} and data["ca.crt"] == ca, (name, where)
                assert public_key(data["tls.key"]) == public_key(data["tls.crt"]) != public_key(ca)
                assert identity in dns_names(data["tls.crt"]), where
                assert not {i for i in IDENTITIES if i != identity} & dns_names(data["tls.crt"]), where
                keys[identity], certificates[identity] = public_key(data["tls.key"]), data["tls.crt"]
                env = env_of(c, objs)
                argv = " ".join(c.get("command", []) + c.get("args", []))
                files = {env.get(k) for k in ("THEVAL_TLS_CERT", "THEVAL_TLS_KEY", "THEVAL_TLS_CA", "THEVAL_TLS_CLIENT_CA")}
                files |= set(re.findall(r"--grpc-(?:server-cert|server-key|root-cert)=(\S+)", argv))
                assert {f for f in files if f} <= {f"{folder}/{k}" for k in data}, (name, where, files)
                if identity != "evaluator":  # mutual TLS: callers need a certificate of the CA
                    assert env.get("THEVAL_TLS_CLIENT_CA") == f"{folder}/ca.crt" or \
                        f"--grpc-root-cert={folder}/ca.crt" in argv, (name, where)
        assert set(keys) == set(IDENTITIES) and len(set(keys.values())) == len(IDENTITIES), name
        settings = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("theval-settings"))
        for key, address in settings["data"].items():
            if key.endswith("_ADDR") or key == "THEVAL_TRITON_URL":
                host = address.rsplit(":", 1)[0]
                assert host in dns_names(certificates[host]), (name, key, address)
    for path in (k8s_dir / "overlays").rglob("*"):  # nor is the CA's key kept beside the manifests
        if path.is_file() and b"PRIVATE KEY" in path.read_bytes():
            assert path.name == "tls.key" and public_key(path.read_bytes()) != public_key(
                (path.parent.parent / "ca.crt").read_bytes()), path


def test_k8s_secrets_name_each_identity_by_its_services_names(k8s_dir):
    folder = k8s_dir / "overlays" / "dev" / "secrets"
    for identity in IDENTITIES:
        assert dns_names((folder / identity / "tls.crt").read_bytes()) == {
            "localhost", identity, f"{identity}.theval", f"{identity}.theval.svc", f"{identity}.theval.svc.cluster.local"}
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == ["ca.crt", "ray-token", "token"]
    assert sorted(p.name for p in (folder / "evaluator").iterdir()) == ["ca.crt", "tls.crt", "tls.key", "tokens"]
