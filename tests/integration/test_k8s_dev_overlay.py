"""The rendered `dev` overlay, run: no API server runs here, so this harness does what the kubelet
would with each Deployment of `kubectl kustomize k8s/overlays/dev`: its init containers to
completion, then its container from the built image with the pod spec's command and args, the
environment from the ConfigMap and Secrets, the user and group, a read-only root filesystem,
dropped capabilities, the memory and CPU limits, Secrets and volumes as temporary directories;
then each probe as Kubernetes runs it (startup, then readiness, `docker exec`), and the kit is
scored through the evaluator Service's port. A manifest whose command, env or probe is wrong fails
here. Stand-ins, named: the host's OPENBLAS_* settings are passed on (numpy's BLAS kernel, for
metrics identical to the embedded run to the last digit); the pod network is the host's loopback (Service names resolve to
127.0.0.1 through --add-host, 0.0.0.0 becomes 127.0.0.1: nothing listens beyond loopback), and
PersistentVolumeClaims are folders (the kit for theval-data, an empty weights store)."""
import base64
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from scripts import images
from tests.support.k8s_support import containers_of, env_of, quantity, render, workspace
from theval_mesh.pure.settings import RunSettings
from theval_mesh.rpc import wire
from theval_mesh.rpc.security import ClientSecurity, client_channel
from theval_mesh.rpc.v1 import common_pb2, evaluator_pb2, evaluator_pb2_grpc

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
FS_GROUP_MODE = 0o440  # what the kubelet makes of a Secret volume's defaultMode under fsGroup


def unhashed(name: str) -> str:
    return re.sub(r"-[a-z0-9]{10}$", "", name)  # a generated Secret: name-<hash>


def loopback(value: str) -> str:
    return value.replace("0.0.0.0", "127.0.0.1")


class Pod:
    """One Deployment's pod as docker containers on the host network."""

    def __init__(self, deployment: dict, objs: list[dict], volumes: dict, tmp: Path, hosts: list[str]):
        self.name = deployment["metadata"]["name"]
        self.spec = deployment["spec"]["template"]["spec"]
        self.objs, self.volumes, self.tmp, self.hosts = objs, volumes, tmp, hosts
        self.container = f"theval-k8s-{self.name}-{os.getpid()}"

    def _mounts(self, c: dict) -> list[str]:
        args = []
        for m in c.get("volumeMounts", []):
            volume = next(v for v in self.spec["volumes"] if v["name"] == m["name"])
            if "emptyDir" in volume:
                size = volume["emptyDir"].get("sizeLimit")
                args += ["--tmpfs", f"{m['mountPath']}:rw,exec,mode=1777" + (f",size={int(quantity(size))}" if size
                                                                                 else "")]
                continue
            if "secret" in volume:
                source = self._secret(volume["secret"])
            else:
                source = self.volumes[volume["persistentVolumeClaim"]["claimName"]]
            ro = ",readonly" if m.get("readOnly") else ""
            args += ["--mount", f"type=bind,source={source},target={m['mountPath']}{ro}"]
        return args

    def _secret(self, ref: dict) -> Path:
        secret = next(o for o in self.objs if o["kind"] == "Secret" and o["metadata"]["name"] == ref["secretName"])
        folder = self.tmp / f"secret-{secret['metadata']['name']}"
        if not folder.is_dir():
            folder.mkdir()
            group = self.spec["securityContext"]["fsGroup"]
            for key, data in secret["data"].items():
                (folder / key).write_bytes(base64.b64decode(data))
                (folder / key).chmod(FS_GROUP_MODE)
                os.chown(folder / key, 0, group)
            folder.chmod(0o755)
        return folder

    def _run_args(self, c: dict) -> list[str]:
        pod, sc = self.spec["securityContext"], c["securityContext"]
        args = ["--network", "host", "--user", f"{pod['runAsUser']}:{pod['runAsGroup']}",
                "--group-add", str(pod["fsGroup"])]
        args += [a for h in self.hosts for a in ("--add-host", f"{h}:127.0.0.1")]
        if sc.get("readOnlyRootFilesystem"):
            args.append("--read-only")
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges:true"]
        args += [a for cap in sc["capabilities"]["drop"] for a in ("--cap-drop", cap)]
        limits = c["resources"]["limits"]
        args += ["--memory", str(int(quantity(limits["memory"]))), "--cpus", str(min(quantity(limits["cpu"]),
                                                                                   os.cpu_count()))]
        for key, value in env_of(c, self.objs).items():
            args += ["-e", f"{key}={loopback(value)}"]
        # The BLAS kernel this machine's processes use (a cluster's nodes detect theirs): the
        # embedded run it is compared with computed with it, to the last digit.
        args += [a for k, v in os.environ.items() if k.startswith("OPENBLAS_") for a in ("-e", f"{k}={v}")]
        args += self._mounts(c)
        command, rest = c.get("command"), [loopback(a) for a in c.get("args", [])]
        if command:  # command replaces the image's ENTRYPOINT, args its CMD
            return args + ["--entrypoint", command[0], c["image"], *[loopback(a) for a in command[1:]], *rest]
        return args + [c["image"], *rest]

    def start(self):
        for c in self.spec.get("initContainers", []):
            done = subprocess.run(["docker", "run", "--rm", *self._run_args(c)], capture_output=True, text=True)
            assert done.returncode == 0, f"{self.name}: init container {c['name']} failed:\n{done.stdout}{done.stderr}"
        (c,) = self.spec["containers"]
        subprocess.run(["docker", "run", "-d", "--name", self.container, "--init", *self._run_args(c)],
                       check=True, capture_output=True)
        self.started = time.monotonic()
        return self

    def probe(self, kind: str) -> bool:
        (c,) = self.spec["containers"]
        p = c[kind]
        done = subprocess.run(["docker", "exec", self.container, *p["exec"]["command"]], capture_output=True,
                              text=True, timeout=p.get("timeoutSeconds", 1) + 10)
        return done.returncode == 0

    def wait(self, kind: str) -> float:
        """Seconds until `kind` succeeds, probing as the kubelet does (initial delay, period,
        failure threshold); fails the test where the kubelet would restart or never route to it."""
        (c,) = self.spec["containers"]
        p = c[kind]
        time.sleep(p.get("initialDelaySeconds", 0))
        for _ in range(p.get("failureThreshold", 3) * (1 if kind != "readinessProbe" else 30)):
            if self.probe(kind):
                return time.monotonic() - self.started
            assert self.running(), f"{self.name} exited:\n{self.logs()}"
            time.sleep(p.get("periodSeconds", 10))
        pytest.fail(f"{self.name}: {kind} never succeeded:\n{self.logs()}")

    def running(self) -> bool:
        return subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", self.container],
                              capture_output=True, text=True).stdout.strip() == "true"

    def logs(self) -> str:
        done = subprocess.run(["docker", "logs", "--tail", "40", self.container], capture_output=True, text=True)
        return done.stdout + done.stderr

    def remove(self):
        subprocess.run(["docker", "rm", "-f", self.container], capture_output=True)


@pytest.fixture(scope="module")
def overlay(built_images, kit, tmp_path_factory):
    """The dev overlay's Deployments running, each READY; (objects, pods, seconds to ready)."""
    tmp = tmp_path_factory.mktemp("k8s-dev")
    objs = render(workspace(tmp), "dev")
    for o in objs:
        for _, _, c in containers_of(o):
            assert c["image"] in {images.tag(n) for n in built_images} | {images.tag("worker")}, c["image"]
    os.chmod(kit.out_dir, 0o755)
    volumes = {"theval-data": Path(kit.out_dir)}
    for claim in ("theval-weights", "theval-store", "theval-jobs"):
        volumes[claim] = tmp / claim
        volumes[claim].mkdir()
        os.chown(volumes[claim], 10001, 10001)
    hosts = [o["metadata"]["name"] for o in objs if o["kind"] == "Service"]
    deployments = [o for o in objs if o["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {"landmarks", "headpose", "quality", "audio",
                                                            "evaluator", "triton"}
    pods = [Pod(d, objs, volumes, tmp, hosts) for d in deployments]
    try:
        for pod in pods:  # all at once, as a fresh `kubectl apply` starts them
            pod.start()
        ready = {}
        for pod in pods:
            pod.wait("startupProbe")
            ready[pod.name] = pod.wait("readinessProbe")
        yield objs, pods, ready
    finally:
        for pod in pods:
            pod.remove()


def test_every_deployment_starts_and_turns_ready_as_the_kubelet_would_see_it(overlay):
    objs, pods, ready = overlay
    print("\nseconds from docker run to ready: " + ", ".join(f"{n} {s:.0f}" for n, s in ready.items()))
    for pod in pods:
        assert pod.probe("livenessProbe"), pod.name
        assert pod.probe("readinessProbe"), pod.name
    # the read-only root holds: nothing may be written outside the volumes
    denied = subprocess.run(["docker", "exec", pods[0].container, "touch", "/opt/theval/x"], capture_output=True)
    assert denied.returncode != 0


def test_the_kit_through_the_evaluator_service_equals_the_embedded_run(overlay, kit, evaluated):
    """Each video by its path in the pods (below /data, the theval-data volume), as a client of
    the cluster sends it, over TLS with a token from the rendered Secrets; raw metrics identical
    to the embedded run's."""
    objs, _, _ = overlay
    port = next(p["port"] for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "evaluator"
                for p in o["spec"]["ports"] if p["name"] == "grpc")
    secret = {unhashed(o["metadata"]["name"]): {k: base64.b64decode(v) for k, v in o["data"].items()}
              for o in objs if o["kind"] == "Secret"}
    ca = Path(kit.out_dir).parent / "k8s-ca.crt"
    ca.write_bytes(secret["theval-tls-evaluator"]["ca.crt"])
    token = next(line.split()[1] for line in secret["theval-tokens"]["tokens"].decode().splitlines()
                 if line and not line.startswith("#"))
    data_root = next(m["mountPath"] for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "evaluator"
                     for m in o["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] if m["name"] == "data")
    embedded = {(r.model, r.video): r for r in evaluated[1]}
    assert len(embedded) == len(kit.clips) * (1 + len(kit.variants))
    in_pods = {(m, v): f"{data_root}/{Path(v).relative_to(kit.out_dir)}" for m, v in embedded}
    settings = wire.settings_to_proto(RunSettings(quality="proxy"))
    requests = [evaluator_pb2.EvaluateRequest(id=f"{model}|{video}", settings=settings,
                                              video=common_pb2.VideoRef(uri=in_pods[(model, video)]))
                for model, video in embedded]
    with client_channel(f"127.0.0.1:{port}", ClientSecurity(str(ca), token=token)) as channel:
        answers = list(evaluator_pb2_grpc.EvaluatorServiceStub(channel).EvaluateStream(iter(requests), timeout=1800))
    assert sorted(a.id for a in answers) == sorted(r.id for r in requests)
    for a in answers:
        assert a.code == 0, (a.id, a.detail)
        remote, local = wire.result_from_proto(a.response.result), embedded[tuple(a.id.split("|", 1))]
        assert remote.video == in_pods[(local.model, local.video)]
        assert (remote.status, remote.metrics, remote.nan_reasons, remote.frames_used) == \
            (local.status, local.metrics, local.nan_reasons, local.frames_used), a.id
