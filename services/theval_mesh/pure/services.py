"""The mesh's services, one row each: the one place their names and facts are declared.

Read by the server runtime (rpc/config.py: which service takes which option; rpc/main.py: what
each serves), the local launcher (`theval mesh up`), the image builds (scripts/images.py, and the
Dockerfiles made by scripts/dockerfiles.py), the compose mesh (scripts/containers.py) and the
Kubernetes helpers (scripts/k8s.py). Files that cannot import Python keep copies, each checked row
by row against this table by a unit test: the ports of docker/mesh.env and the services of
docker/compose.yaml (tests/unit/test_service_table.py), the Deployments, Services, addresses and
image tags of k8s/ (tests/unit/test_k8s_manifests.py), one .proto per service
(tests/unit/test_mesh_protos.py). docs/adding-a-service.md says what a new row needs.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Service:
    name: str            # `theval serve NAME`, its THEVAL_NAME_ADDR, its Kubernetes Service and TLS identity
    port: int            # its gRPC port where deployed (mesh.env, k8s/; `theval mesh up` gives the evaluator's)
    metrics_port: int    # its Prometheus /metrics port, likewise
    module: str          # the module whose register(cfg) serves it, imported by name (rpc/main.py)
    extra: str           # its pyproject extra: all its image installs beyond the base dependencies
    image: str           # its container image, theval/IMAGE (scripts/images.py builds it)
    reads_videos: bool = False  # decodes videos: takes the allowed roots and the size limits
    roots_required: bool = False  # refuses to start without an allowed root
    on_triton: bool = False  # its models can run on Triton (--backend triton)
    weights: bool = False  # loads model weights from the store (--weights-store)
    settings: tuple = ()  # the run settings it loads its models by at start-up (the evaluator takes all)
    depends_on: tuple = ()  # the services it calls (their addresses are its required settings)
    # Under mutual TLS, the certificate names (common names) that may call it; () = any the CA
    # signed (the evaluator, whose API callers also need a token).
    callers: tuple = ("evaluator",)


TABLE = (
    Service("landmarks", 50061, 9465, "theval_mesh.rpc.servicers.landmarks", "landmarks", "landmarks",
            reads_videos=True, roots_required=True),
    # Decodes videos only with FaceXFormer (EstimateVideo): a rigid-fit one reads none, so its roots
    # stay optional.
    Service("headpose", 50062, 9466, "theval_mesh.rpc.servicers.headpose", "headpose", "headpose",
            reads_videos=True, on_triton=True, weights=True, settings=("headpose",)),
    Service("quality", 50063, 9467, "theval_mesh.rpc.servicers.quality", "quality", "quality",
            reads_videos=True, roots_required=True, on_triton=True, weights=True, settings=("profile", "quality")),
    Service("audio", 50064, 9468, "theval_mesh.rpc.servicers.audio", "audio", "audio",
            reads_videos=True, roots_required=True, on_triton=True),
    Service("evaluator", 50051, 9464, "theval_mesh.evaluator.servicer", "evaluator", "evaluator",
            reads_videos=True, roots_required=True, depends_on=("landmarks", "headpose", "quality", "audio"), callers=()),
)

BY_NAME = {s.name: s for s in TABLE}
SERVICES = tuple(BY_NAME)
DEPENDENCIES = BY_NAME["evaluator"].depends_on  # what the evaluator calls
TRITON_CALLERS = tuple(s.name for s in TABLE if s.on_triton)  # the certificate names Triton's front admits
