"""The GPU check (bench/gpu_check.sh runs it): each network on the device against the CPU path, its
speed, and a whole 8-metric run, in one table. Stand-in weights (a network's speed and the
runtimes' agreement do not depend on the weights' values).

    python bench/gpu_check.py [--device cuda|cuda:N|cpu] [--clips 4] [--frames 48]

Needs only the networks' code (this repository's package on PYTHONPATH) and torch, pyiqa, facexlib,
h5py, opencv, onnx and the runtimes that are installed; the 8-metric run needs MediaPipe too and is
skipped, said so, without it.
"""
import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from network_speed import inputs, networks

ROOT = Path(__file__).resolve().parents[1]


def runtimes_on(device: str) -> list[str]:
    """The runtimes to try on `device`: torch always; onnxruntime where its provider for the
    device is installed; openvino on the CPU."""
    import onnxruntime
    out = ["torch"]
    if device == "cpu" or "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        out.append("onnxruntime")
    if device == "cpu":
        out.append("openvino")
    return out


def flat(out) -> np.ndarray:
    if isinstance(out, list):  # the detector: frames x maps
        return np.concatenate([np.concatenate([m.ravel() for m in maps]) for maps in out])
    return np.asarray(out, np.float64).ravel()


def whole_run(store: Path, device: str, clips: int, frames: int) -> str:
    """`theval evaluate` with every network (paper quality, FaceXFormer) on `device`, seconds per frame."""
    try:
        import mediapipe  # noqa: F401
    except ImportError:
        return "skipped: MediaPipe is not installed here (the landmark metrics need it)"
    sys.path.insert(0, str(ROOT))
    from tests.support.model_parity_set import cut
    from tests.support.parity_set import oracle
    names = sorted(oracle())[:clips]
    folder = Path(tempfile.mkdtemp(prefix="theval-gpu-check-"))
    paths = [cut(name, frames, folder / f"{name}.mp4") for name in names]
    t = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "theval_mesh", "evaluate", "--gt", str(folder), "--out",
                    str(folder / "out"), "--inline", "--quiet", "--quality", "paper", "--headpose", "facexformer",
                    "--no-cache", "--weights-store", str(store), "--device", device],
                         check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t
    if run.returncode not in (0, 4):  # 4: scored, but cut clips cannot normalise lip sync (no ranking)
        return f"FAILED (exit {run.returncode}): {run.stderr.strip().splitlines()[-1:]}"
    return f"{len(paths)} clips x {frames} frames: {seconds:.1f} s, {seconds / (len(paths) * frames):.3f} s/frame"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--clips", type=int, default=4)
    p.add_argument("--frames", type=int, default=48)
    p.add_argument("--batch", type=int, default=8)
    args = p.parse_args()
    import torch

    from theval_mesh.backends import stand_in
    from theval_mesh.backends.inference.plan import resolve
    from theval_mesh.pure.inference import InferenceOptions

    device = resolve(InferenceOptions(device=args.device)).device  # refuses a GPU that is not there
    name = torch.cuda.get_device_name(int(device.split(":")[1])) if device != "cpu" else f"{os.cpu_count()} CPU cores"
    print(f"device {device} ({name}); torch {torch.__version__}; Python {sys.version.split()[0]}", flush=True)
    store = Path(tempfile.mkdtemp(prefix="theval-gpu-check-weights-"))  # GBs with the exports: removed at exit
    atexit.register(shutil.rmtree, store, True)
    stand_in.write(store, 0, headpose=True)
    x = inputs(np.random.default_rng(0), args.batch)
    yardstick = networks(store, "torch")  # eager torch on the CPU at fp32
    expected = {net: flat(run(x)) for net, run in yardstick.items()}
    del yardstick
    rows = []
    for runtime in runtimes_on(device):
        loaded = networks(store, runtime, device)
        for net, run in loaded.items():
            run(inputs(np.random.default_rng(1), 1))  # warm
            if device != "cpu":
                torch.cuda.synchronize()
            t = time.perf_counter()
            got = flat(run(x))
            if device != "cpu":
                torch.cuda.synchronize()
            fps = args.batch / (time.perf_counter() - t)
            scale = np.abs(expected[net]).max() or 1.0
            rows.append((net, runtime, fps, float(np.abs(got - expected[net]).max() / scale)))
        del loaded
    print(f"\n| network | runtime on {device} | images/s (batch {args.batch}) | max difference from CPU torch "
          "(of the output's largest magnitude; topiq_nr-face: detector, alignment and CFANet together) |")
    print("|---|---|---|---|")
    for net, runtime, fps, diff in rows:
        print(f"| {net} | {runtime} | {fps:.2f} | {diff:.1e} |")
    print(f"\nwhole run, 8 metrics, every network on {device}: "
          f"{whole_run(store, args.device, args.clips, args.frames)}")


if __name__ == "__main__":
    main()
