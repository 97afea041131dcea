# A Ray node for bulk scoring on KubeRay (k8s/base/raycluster.yaml): every model in process, so
# each Ray worker scores whole videos (landmarks, quality, audio) and the cluster scales with the
# backlog. KubeRay starts `ray start` in it and probes it: no gRPC health check of its own.
# The build context is made by `./dev images` (scripts/images.py): wheels/ holds exactly the
# third-party wheels this image installs beyond the torch runtime, project/ the project's own
# wheel, both from the wheelhouse built on the host with constraints.txt; the build runs with
# --network none. The
# dependencies' layers stay cached while only the project's code changes.
# The PyTorch runtime (torch.Dockerfile on the same BASE), shared with the other torch images.
ARG TORCH=theval/torch:latest

FROM ${TORCH} AS build
COPY wheels/ /wheels/
# Installed beside the runtime's venv (as its non-root user), then laid over it.
RUN pip install --no-cache-dir --no-index --no-deps --prefix /tmp/deps /wheels/*.whl
COPY project/ /project/
RUN pip install --no-cache-dir --no-index --no-deps --prefix /tmp/project /project/*.whl \
 && PYTHONPATH=/tmp/deps/lib/python3.11/site-packages:/tmp/project/lib/python3.11/site-packages pip check

FROM ${TORCH}
COPY --from=build /tmp/deps /opt/theval
COPY --from=build /tmp/project /opt/theval
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG SOURCE=theval-mesh
LABEL org.opencontainers.image.title="theval-worker" \
      org.opencontainers.image.description="A Ray node for bulk scoring: every model in process." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
# KubeRay gives the command (`ray start ...`); run alone it is the CLI.
ENTRYPOINT ["theval"]
