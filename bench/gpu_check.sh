#!/usr/bin/env bash
# The GPU check, in one command, under 8 minutes on one GPU: stand-in weights, each network on the
# GPU runtime against the CPU path (max difference), images per second per network, and a whole
# 8-metric run of 4 parity clips; one table (bench/gpu_check.py).
#
#   bash bench/gpu_check.sh [--device cuda|cuda:N|cpu] [--clips N] [--frames N]
#
# It runs with whatever Python the machine has (a GPU machine may have 3.12 with a CUDA torch and
# no MediaPipe): this repository's package from the source tree (PYTHONPATH), torch from the
# machine, and the rest from the project's .venv when there is one, else from wheels carried in
# bench/wheels/ (`pip download -d bench/wheels --python-version X.Y --only-binary=:all: pyiqa
# facexlib h5py onnx onnxruntime-gpu` on a machine that reaches the package index), else as installed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/services:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -x .venv/bin/python ]; then
  py=.venv/bin/python
else
  py=$(command -v python3)
  if [ -d bench/wheels ]; then
    [ -x .gpu-venv/bin/python ] || "$py" -m venv --system-site-packages .gpu-venv
    .gpu-venv/bin/pip install -q --no-index --find-links bench/wheels pyiqa facexlib h5py onnx onnxruntime-gpu \
      || .gpu-venv/bin/pip install -q --no-index --find-links bench/wheels pyiqa facexlib h5py onnx onnxruntime
    py=.gpu-venv/bin/python
  fi
fi
exec timeout 480 "$py" bench/gpu_check.py "$@"
