# Triton on GPU nodes: NVIDIA's Triton image (tritonserver 2.51 = release 24.10, the version the
# nvidia-pytriton wheel bundles) with the project's model repository and its KIND_GPU configs.
# NVIDIA's image runs Python 3.10; the models need this project's Python 3.11 environment, so the
# Python backend gets the 3.11 stub that the nvidia-pytriton wheel ships, and the venv's python3
# first on PATH (the stub finds its interpreter there). The PyPI torch wheel is CUDA-enabled.
# The context is made by `./dev images triton-gpu` (scripts/images.py): wheels/ holds every wheel
# (torch runtime included), project/ the project's own. It is built where NVIDIA's registry is
# reachable (not on the project's offline CI machine, which builds the CPU triton image instead).
ARG BASE=nvcr.io/nvidia/tritonserver:24.10-py3

FROM ${BASE}
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
 && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,source=wheels,target=/wheels \
    python3.11 -m venv /opt/theval \
 && /opt/theval/bin/pip install --no-cache-dir --no-index --no-deps /wheels/*.whl
RUN --mount=type=bind,source=project,target=/project \
    /opt/theval/bin/pip install --no-cache-dir --no-index --no-deps /project/*.whl \
 && /opt/theval/bin/pip check \
 && cp /opt/theval/lib/python3.11/site-packages/pytriton/tritonserver/python_backend_stubs/3.11/triton_python_backend_stub \
       /opt/tritonserver/backends/python/triton_python_backend_stub
COPY triton_models/ /opt/theval/triton_models/
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG SOURCE=theval-mesh
LABEL org.opencontainers.image.title="theval-triton-gpu" \
      org.opencontainers.image.description="Triton (GPU) with the THEval model repository." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
ENV PATH=/opt/theval/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    THEVAL_WEIGHTS=/var/lib/theval/weights \
    THEVAL_TRITON_HTTP_PORT=8000
# triton-server: the unprivileged user of NVIDIA's image.
USER 1000:1000
HEALTHCHECK --interval=5s --timeout=4s --start-period=300s --retries=3 \
  CMD ["python", "-m", "theval_mesh.rpc.probe", "--triton"]
ENTRYPOINT ["tritonserver", "--model-repository=/opt/theval/triton_models", "--model-config-name=gpu"]
