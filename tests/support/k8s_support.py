"""The Kubernetes manifests as the tests see them: each overlay rendered by `kubectl kustomize` (the
installed kubectl, and Debian's 1.20 with kustomize v2 that `./dev test` unpacks) from a copy of
the repository's k8s/ and monitoring/ with freshly made TLS material and tokens, and the custom
resources' schemas from k8s/crds/."""
import gzip
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from scripts import k8s

ROOT = Path(__file__).resolve().parents[2]

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


def pod_templates(obj: dict) -> list[tuple[str, dict]]:
    """(where, pod template) of every pod a workload makes: a Deployment's or Job's, a
    RayCluster's head and worker groups, a RayJob's submitter."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind in ("Deployment", "Job"):
        return [(name, obj["spec"]["template"])]
    if kind == "RayCluster":
        return [(f"{name} head", obj["spec"]["headGroupSpec"]["template"])] + [
            (f"{name} {g['groupName']}", g["template"]) for g in obj["spec"].get("workerGroupSpecs", [])]
    if kind == "RayJob" and "submitterPodTemplate" in obj["spec"]:
        return [(f"{name} submitter", obj["spec"]["submitterPodTemplate"])]
    return []


def containers_of(obj: dict) -> list[tuple[str, dict, dict]]:
    """(where, pod spec, container) of every container and init container of a workload."""
    return [(f"{where}/{c['name']}", t["spec"], c) for where, t in pod_templates(obj)
            for c in t["spec"].get("initContainers", []) + t["spec"]["containers"]]


def quantity(text: str) -> float:
    """A Kubernetes quantity ("1536Mi", "2", "500m") as a number."""
    units = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "m": 1e-3}
    match = re.fullmatch(r"([\d.]+)(Ki|Mi|Gi|m)?", str(text))
    return float(match.group(1)) * units.get(match.group(2), 1)


def memory_limits(objects: list[dict]) -> dict[str, int]:
    """{Deployment: bytes} of each Deployment's first container's memory limit."""
    return {o["metadata"]["name"]: int(quantity(o["spec"]["template"]["spec"]["containers"][0]["resources"]
                                                ["limits"]["memory"])) for o in objects if o["kind"] == "Deployment"}


def selects(selector: dict, labels: dict) -> bool:
    """A label selector (matchLabels, matchExpressions) as Kubernetes applies it."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    tests = {"In": lambda e: labels.get(e["key"]) in e["values"],
             "NotIn": lambda e: labels.get(e["key"]) not in e["values"],
             "Exists": lambda e: e["key"] in labels, "DoesNotExist": lambda e: e["key"] not in labels}
    return all(tests[e["operator"]](e) for e in selector.get("matchExpressions", []))


@dataclass
class Pod:
    """A network endpoint: labels, its namespace's labels, its ports ({name: number}, a number
    as its own name too)."""
    where: str
    labels: dict
    namespace: dict
    ports: dict


def _ports(pod_spec: dict) -> dict:
    ports = {}
    for c in pod_spec["containers"]:
        for p in c.get("ports", []):
            ports[p["containerPort"]] = p["containerPort"]
            if "name" in p:
                ports[p["name"]] = p["containerPort"]
    return ports


class Network:
    """The rendered NetworkPolicies' verdict on a connection, as the API defines it (no CNI runs
    here): a pod selected by no policy of a direction is open in it, one selected by some is open
    only to what one of their rules allows; both ends must allow. Peers: a podSelector alone
    means this namespace; with a namespaceSelector, the namespaces it selects."""

    def __init__(self, objs: list[dict]):
        ns = next(o for o in objs if o["kind"] == "Namespace")
        self.namespace = {**ns["metadata"].get("labels", {}), "kubernetes.io/metadata.name": ns["metadata"]["name"]}
        self.policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
        self.pods = {where: Pod(where, t["metadata"].get("labels", {}), self.namespace, _ports(t["spec"]))
                     for o in objs for where, t in pod_templates(o)}

    def pod(self, where: str) -> Pod:
        return self.pods[where]

    def outside(self, namespace: str, ports=(), **labels) -> Pod:
        """A pod of another namespace (e.g. kube-system's DNS, the operator's)."""
        return Pod(f"{namespace}/{labels}", labels, {"kubernetes.io/metadata.name": namespace}, {p: p for p in ports})

    def peer_matches(self, peer: dict, pod: Pod) -> bool:
        if "ipBlock" in peer:
            return True  # an address range: any pod may be in it
        if "namespaceSelector" in peer:
            if not selects(peer["namespaceSelector"], pod.namespace):
                return False
        elif pod.namespace != self.namespace:
            return False
        return selects(peer.get("podSelector", {}), pod.labels)

    @staticmethod
    def _port(ports: list | None, dst: Pod, port, protocol: str) -> bool:
        number = dst.ports.get(port, port if isinstance(port, int) else None)
        for p in ports or [{}]:
            if p.get("protocol", "TCP") != protocol:
                continue
            if "port" not in p or p["port"] == port or p["port"] == number:
                return True
            if isinstance(p["port"], str) and dst.ports.get(p["port"]) == number:
                return True
        return False

    def _open(self, pod: Pod, direction: str, other: Pod, dst: Pod, port, protocol: str) -> bool:
        if pod.namespace != self.namespace:
            return True  # not ours to say
        policies = [p for p in self.policies if direction.capitalize() in p["spec"].get("policyTypes", ["Ingress"])
                    and selects(p["spec"]["podSelector"], pod.labels)]
        if not policies:
            return True
        peers = "from" if direction == "ingress" else "to"
        return any((peers not in rule or any(self.peer_matches(peer, other) for peer in rule[peers]))
                   and self._port(rule.get("ports"), dst, port, protocol)
                   for p in policies for rule in p["spec"].get(direction, []))

    def allows(self, src: Pod, dst: Pod, port, protocol: str = "TCP") -> bool:
        """May src open a connection to dst's `port` (its name or number)?"""
        return (self._open(src, "egress", dst, dst, port, protocol)
                and self._open(dst, "ingress", src, dst, port, protocol))


def env_of(container: dict, objects: list[dict], pod_ip: str = "127.0.0.1") -> dict:
    """The container's environment as Kubernetes builds it: envFrom ConfigMaps, then env (values;
    Secret and ConfigMap references resolved from the rendered objects; the downward API's pod IP
    is `pod_ip`: tests/integration/test_k8s_dev_overlay.py runs the pods on loopback)."""
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    env = {}
    for source in container.get("envFrom", []):
        env.update(by_name[("ConfigMap", source["configMapRef"]["name"])]["data"])
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        elif "fieldRef" in e["valueFrom"]:
            assert e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", e
            env[e["name"]] = pod_ip
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
