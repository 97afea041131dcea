# A Ray node for bulk scoring on KubeRay (k8s/base/raycluster.yaml): every model in process, so
# each Ray worker scores whole videos (landmarks, quality, audio) and the cluster scales with the
# backlog. KubeRay starts `ray start` in it and probes it: no gRPC health check of its own.
# The build context is made by `./dev images` (scripts/images.py): wheels/ holds exactly the
# third-party wheels this image installs beyond the torch runtime, project/ the project's own
# wheel, both from the wheelhouse built on the host with constraints.txt. BuildKit mounts them for
# the installs only (no layer holds a wheel) and the build runs with --network none. The
# dependencies' layer stays cached while only the project's code changes.
# The PyTorch runtime (torch.Dockerfile on the same BASE), shared with the other torch images.
ARG TORCH=theval/torch:latest

FROM ${TORCH}
# Installed into the runtime's venv as root; the runtime's user is restored below.
USER 0:0
RUN --mount=type=bind,source=wheels,target=/wheels \
    pip install --no-cache-dir --no-index --no-deps /wheels/*.whl
RUN --mount=type=bind,source=project,target=/project \
    pip install --no-cache-dir --no-index --no-deps /project/*.whl \
 && pip check
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG SOURCE=theval-mesh
LABEL org.opencontainers.image.title="theval-worker" \
      org.opencontainers.image.description="A Ray node for bulk scoring: every model in process." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
# KubeRay gives the command (`ray start ...`); run alone it is the CLI.
USER 10001:10001
ENTRYPOINT ["theval"]
