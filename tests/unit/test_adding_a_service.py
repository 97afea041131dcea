"""docs/adding-a-service.md, followed in a copy of the repository up to its last section: its toy
service (blink) gets its API, servicer, row, extra, image, compose container and Kubernetes objects
as the page's steps say; the checks of each copy pass there, the places that read the table name
it, and `theval serve blink` serves its call."""
import json
import re
import signal
import subprocess
import sys
import time

import grpc
import pytest

from tests.support.page_support import ROOT, add_file, blocks, copy_repository, environment, insert, run
from theval_mesh.rpc import probe
from theval_mesh.rpc.v1 import common_pb2

PAGE = ROOT / "docs" / "adding-a-service.md"
DERIVED = """
import json
from scripts import containers, images, k8s
from theval_mesh.commands import mesh
from theval_mesh.rpc import config
from theval_mesh.rpc.main import SERVICE_MODULES
print(json.dumps({"config": config.SERVICES, "modules": SERVICE_MODULES, "mesh up": mesh.LEAVES,
                  "images": images.SERVICE_IMAGES, "containers": containers.SERVICES, "k8s": k8s.IDENTITIES}))
"""


def follow_the_page(repo):
    steps = blocks(PAGE)
    # 1. its API
    add_file(repo, "protos/theval/v1/blink.proto", *steps["protos/theval/v1/blink.proto"])
    run(repo, "protos/generate.py")
    # 2. its servicer, in the independence contract of the servicers
    servicer = "services/theval_mesh/rpc/servicers/blink.py"
    add_file(repo, servicer, *steps[servicer])
    contract, extra = steps["pyproject.toml"]
    insert(repo / "pyproject.toml", contract, before='  "theval_mesh.rpc.servicers.audio",')
    # 3. its row, above the evaluator's
    insert(repo / "services/theval_mesh/pure/services.py", *steps["services/theval_mesh/pure/services.py"],
           before='    Service("evaluator"')
    # 4. its extra (named in `all` too) and its image
    insert(repo / "pyproject.toml", extra, before="all = ")
    pyproject = (repo / "pyproject.toml").read_text()
    (repo / "pyproject.toml").write_text(re.sub(r'^(all = \["theval-mesh\[[^]]*)\]', r"\1,blink]", pyproject,
                                                count=1, flags=re.M))
    insert(repo / "scripts/images.py", *steps["scripts/images.py"], before='    service_image("evaluator"')
    assert run(repo, "scripts/dockerfiles.py").stdout == "wrote docker/blink.Dockerfile\n"
    # 5. the compose mesh
    insert(repo / "docker/mesh.env", *steps["docker/mesh.env"], before="# Quality models")
    insert(repo / "docker/compose.yaml", *steps["docker/compose.yaml"], before="  evaluator:")
    # 6. Kubernetes
    audio = (repo / "k8s/base/audio.yaml").read_text()
    (repo / "k8s/base/blink.yaml").write_text(re.sub(r"\baudio\b", "blink", audio).replace("50064", "50065")
                                              .replace("9468", "9469"))
    kustomization = repo / "k8s/base/kustomization.yaml"
    resource, image = steps["k8s/base/kustomization.yaml"]
    tag = re.search(r"name: theval/evaluator\n\s+newTag: (\S+)", kustomization.read_text())[1]  # the others'
    insert(kustomization, resource, before="  - evaluator.yaml")
    insert(kustomization, image.replace("0.1.0", tag), before="  - name: theval/evaluator")
    insert(repo / "k8s/base/serviceaccounts.yaml", *steps["k8s/base/serviceaccounts.yaml"])
    for overlay in ("dev", "gpu"):
        insert(repo / f"k8s/overlays/{overlay}/kustomization.yaml", *steps["k8s/overlays/dev/kustomization.yaml"],
               before="  - name: theval-tls-evaluator")


@pytest.mark.k8s  # runs test_k8s_manifests.py's checks in the copy: kubectl renders its manifests
def test_following_the_page_adds_a_service_everywhere(tmp_path):
    repo = copy_repository(tmp_path, "services", "tests", "scripts", "docker", "protos", "k8s", "monitoring",
                           "docs", "pyproject.toml")
    follow_the_page(repo)

    # The checks of every place the page changed pass.
    k8s = [f"tests/unit/test_k8s_manifests.py::{name}" for name in (
        "test_each_service_is_deployed_as_its_row_of_the_service_table_says",
        "test_services_and_addresses_point_at_ports_that_exist", "test_env_variables_and_ports_are_the_codes",
        "test_each_pod_mounts_its_own_key_alone_and_no_secret_holds_the_cas_key")]
    done = run(repo, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_service_table.py",
               "tests/unit/test_dockerfiles.py", "tests/unit/test_mesh_protos.py", "tests/unit/test_layers.py",
               "tests/unit/test_service_imports.py::test_a_service_imports_only_what_it_serves_and_its_extra_installs"
               "[blink]", *k8s, check=False)
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-4000:]

    # The places that read the table name it.
    derived = json.loads(run(repo, "-c", DERIVED).stdout)
    assert derived["modules"]["blink"] == "theval_mesh.rpc.servicers.blink"
    for where in ("config", "mesh up", "images", "containers", "k8s"):
        assert "blink" in derived[where], where
    assert "blink" in run(repo, "-m", "theval_mesh", "serve", "--help").stdout

    # `theval serve blink` serves health and its call.
    server = subprocess.Popen([sys.executable, "-m", "theval_mesh", "serve", "blink", "--port", "0", "--metrics-port",
                               "0", "--grace-s", "1"], cwd=repo, env=environment(repo), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        seen, listening = "", None
        for line in server.stdout:  # until it says where it listens, or exits
            seen += line
            if listening := re.search(r"^blink: listening on 127\.0\.0\.1:(\d+)", line):
                break
        assert listening, seen
        port = listening[1]
        # it prints its address as it binds; health turns SERVING once it is ready: wait for that
        deadline, health = time.monotonic() + 60, probe.check({"THEVAL_PORT": port})
        while health != "SERVING" and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.2)
            health = probe.check({"THEVAL_PORT": port})
        assert health == "SERVING", seen
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            describe = channel.unary_unary("/theval.v1.BlinkService/Describe",
                                           request_serializer=common_pb2.DescribeRequest.SerializeToString,
                                           response_deserializer=common_pb2.DescribeResponse.FromString)
            assert describe(common_pb2.DescribeRequest(), timeout=10).backend == "blink skeleton"
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(30)
        server.stdout.close()
    assert code == 0, seen
