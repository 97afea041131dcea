# Triton Inference Server with the project's model repository (triton_models/): the tritonserver
# bundled in the nvidia-pytriton wheel, its Python backend running the models with this image's
# torch, pyiqa and Silero (on CPU here; the GPU image is triton-gpu.Dockerfile). Quality weights
# are mounted at /var/lib/theval/weights; without them only silero_vad loads.
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
COPY triton_models/ /opt/theval/triton_models/
USER 10001:10001
ARG VERSION=0.0.0
ARG REVISION=unknown
ARG SOURCE=theval-mesh
LABEL org.opencontainers.image.title="theval-triton" \
      org.opencontainers.image.description="Triton (CPU) with the THEval model repository." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="see the project"
ENV THEVAL_TRITON_MODELS=/opt/theval/triton_models \
    THEVAL_WEIGHTS=/var/lib/theval/weights
# Triton's own readiness endpoint, on the HTTP port `theval triton up` uses.
ENV THEVAL_TRITON_HTTP_PORT=8000
HEALTHCHECK --interval=5s --timeout=4s --start-period=300s --retries=3 \
  CMD ["python", "-m", "theval_mesh.rpc.probe", "--triton"]
ENTRYPOINT ["theval", "triton", "up", "--host", "127.0.0.1"]
