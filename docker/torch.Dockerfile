# The PyTorch runtime shared by the quality, audio and triton images: a venv in /opt/theval with
# torch and its dependencies only. They start FROM it, so its ~5 GB (the PyPI wheel brings torch's
# CUDA libraries) are stored and pulled once. No revision label: it changes with the wheels only,
# and a new image here would rebuild the three images above it.
# The build context is made by `./dev images` (scripts/images.py): wheels/ holds exactly the wheels
# to install, from the wheelhouse built on the host with constraints.txt. BuildKit mounts them for
# the install only, so the image holds the venv once and no wheel (--network none).
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE}
# OpenCV (pyiqa's, the quality proxy's) loads libGL and GLib: in the project's own base already,
# installed from Debian on the official python image.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN if ! ldconfig -p | grep -q libGL.so.1; then \
      apt-get update && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
      && rm -rf /var/lib/apt/lists/*; fi
RUN --mount=type=bind,source=wheels,target=/wheels \
    python3 -m venv /opt/theval \
 && /opt/theval/bin/pip install --no-cache-dir --no-index --no-deps /wheels/*.whl \
 && /opt/theval/bin/pip check
ARG VERSION=0.0.0
LABEL org.opencontainers.image.title="theval-torch" \
      org.opencontainers.image.description="The PyTorch runtime of the THEval images" \
      org.opencontainers.image.version="${VERSION}"
ENV PATH=/opt/theval/bin:$PATH \
    MALLOC_ARENA_MAX=2 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
USER 10001:10001
