"""The Kubernetes manifests as the tests see them: each overlay rendered by `kubectl kustomize` (the
installed kubectl, and Debian's 1.20 with kustomize v2 that `./dev test` unpacks) from a copy of
the repository's k8s/ and monitoring/ with freshly made TLS material and tokens, and the custom
resources' schemas from k8s/crds/."""
import gzip
import os
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import k8s  # noqa: E402  (scripts/k8s.py)

CRDS = ROOT / "k8s" / "crds"
RENDERED = ("dev", "gpu", "samples")  # what users apply: both overlays, the samples


def kubectls() -> dict:
    """{label: kubectl binary}: the installed one, and kustomize v2's (kubectl 1.20)."""
    v2 = os.environ.get("THEVAL_KUBECTL_V2") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "theval/kubectl-1.20/usr/bin/kubectl")
    found = {"kubectl": shutil.which("kubectl"), "kubectl 1.20 (kustomize v2)": v2 if Path(v2).is_file() else None}
    missing = [k for k, v in found.items() if not v]
    assert not missing, f"{', '.join(missing)} not found: `./dev test` installs them"
    return found


def workspace(tmp: Path) -> Path:
    """A copy of k8s/ and monitoring/ with each overlay's secrets/ made; returns its k8s/."""
    for part in ("k8s", "monitoring"):
        shutil.copytree(ROOT / part, tmp / part, ignore=shutil.ignore_patterns("secrets"))
    for overlay in k8s.OVERLAYS:
        k8s.make_secrets(tmp / "k8s" / "overlays" / overlay)
    return tmp / "k8s"


def render(k8s_dir: Path, name: str, kubectl: str = "kubectl") -> list[dict]:
    where = k8s_dir / ("samples" if name == "samples" else f"overlays/{name}")
    return k8s.render(where, kubectl)


def crd_schemas() -> dict:
    """{(apiVersion, kind): openAPIV3Schema} of every CRD file kept in k8s/crds/."""
    out = {}
    for path in sorted(CRDS.glob("*.yaml.gz")):
        crd = yaml.safe_load(gzip.decompress(path.read_bytes()))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            if v.get("served"):
                out[(f"{group}/{v['name']}", kind)] = v["schema"]["openAPIV3Schema"]
    return out


def containers_of(obj: dict) -> list[tuple[str, dict, dict]]:
    """(where, pod spec, container) of every container and init container of a workload."""
    specs = []
    kind = obj["kind"]
    if kind in ("Deployment", "Job"):
        specs.append((obj["metadata"]["name"], obj["spec"]["template"]["spec"]))
    elif kind == "RayCluster":
        specs.append((f"{obj['metadata']['name']} head", obj["spec"]["headGroupSpec"]["template"]["spec"]))
        specs += [(f"{obj['metadata']['name']} {g['groupName']}", g["template"]["spec"])
                  for g in obj["spec"].get("workerGroupSpecs", [])]
    elif kind == "RayJob" and "submitterPodTemplate" in obj["spec"]:
        specs.append((f"{obj['metadata']['name']} submitter", obj["spec"]["submitterPodTemplate"]["spec"]))
    return [(f"{where}/{c['name']}", spec, c) for where, spec in specs
            for c in spec.get("initContainers", []) + spec["containers"]]


def env_of(container: dict, objects: list[dict]) -> dict:
    """The container's environment as Kubernetes builds it: envFrom ConfigMaps, then env (values;
    Secret and ConfigMap references resolved from the rendered objects)."""
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    env = {}
    for source in container.get("envFrom", []):
        env.update(by_name[("ConfigMap", source["configMapRef"]["name"])]["data"])
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            ref = e["valueFrom"].get("secretKeyRef") or e["valueFrom"]["configMapKeyRef"]
            kind = "Secret" if "secretKeyRef" in e["valueFrom"] else "ConfigMap"
            obj = by_name[(kind, ref["name"])]
            value = obj["data"][ref["key"]]
            if kind == "Secret":
                import base64
                value = base64.b64decode(value).decode()
            env[e["name"]] = value
    return env
