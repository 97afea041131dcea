# The head-pose service: angles from the landmarks (numpy only).
# Made by `python scripts/dockerfiles.py` from docker/templates/service.template and the
# image's row in scripts/images.py: edit those, not this file.
# The build context is made by `./dev images` (scripts/images.py): wheels/ holds exactly the
# third-party wheels this image installs, project/ the project's own wheel, both from the
# wheelhouse built on the host with constraints.txt. BuildKit mounts them for the installs only
# (no layer holds a wheel) and the build runs with --network none. The dependencies' layer stays
# cached while only the project's code changes.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE}
RUN --mount=type=bind,source=wheels,target=/wheels \
    python3 -m venv /opt/theval \
 && /opt/theval/bin/pip install --no-cache-dir --no-index --no-deps /wheels/*.whl
RUN --mount=type=bind,source=project,target=/project \
    /opt/theval/bin/pip install --no-cache-dir --no-index --no-deps /project/*.whl \
 && /opt/theval/bin/pip check
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG SOURCE=theval-mesh
LABEL org.opencontainers.image.title="theval-headpose" \
      org.opencontainers.image.description="The head-pose service: angles from the landmarks (numpy only)." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
ENV PATH=/opt/theval/bin:$PATH \
    MALLOC_ARENA_MAX=2 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
USER 10001:10001
# Settings come from THEVAL_* variables (THEVAL_PORT and THEVAL_METRICS_PORT are required); the
# probe checks grpc.health.v1 on THEVAL_PORT, over TLS with this server's own certificate when set.
HEALTHCHECK --interval=5s --timeout=4s --start-period=60s --retries=3 \
  CMD ["python", "-m", "theval_mesh.rpc.probe"]
ENTRYPOINT ["python", "-m", "theval_mesh.rpc.main", "headpose"]
