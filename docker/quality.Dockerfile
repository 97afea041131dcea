# The quality service: IQA/IAA models with pyiqa (or the labelled training-free proxy).
# Made by `python scripts/dockerfiles.py` from docker/templates/service-on-torch.template and the
# image's row in scripts/images.py: edit those, not this file.
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
USER 10001:10001
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG SOURCE=theval-mesh
LABEL org.opencontainers.image.title="theval-quality" \
      org.opencontainers.image.description="The quality service: IQA/IAA models with pyiqa (or the labelled training-free proxy)." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
# Settings come from THEVAL_* variables (THEVAL_PORT and THEVAL_METRICS_PORT are required); the
# probe checks grpc.health.v1 on THEVAL_PORT, over TLS with this server's own certificate when set.
HEALTHCHECK --interval=5s --timeout=4s --start-period=300s --retries=3 \
  CMD ["python", "-m", "theval_mesh.rpc.probe"]
ENTRYPOINT ["python", "-m", "theval_mesh.rpc.main", "quality"]
