"""Each network on each runtime: images per second at batch 1, 8 and 32, and the peak memory of a
process holding every network, eager torch against the runtime chosen by default.

The same stand-in weights (a network's speed does not depend on its weights' values) and the same
inputs on every runtime, in one run, one runtime after another per network and batch; the product's
own call paths (LocalModels.scores, RetinaFaceDetector.outputs, LocalNetwork.degrees), so the torch
pre-processing around each network is counted too. Its table is backends/inference/plan.py's
FASTEST and docs/benchmarks.md's.

    .venv/bin/python bench/network_speed.py [BATCHES] [--memory]   # default 1,8,32; --memory: peaks only
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import ROOT  # noqa: F401 - first: the repository's root on sys.path

RUNTIMES = ("torch", "onnxruntime", "openvino")


def inputs(rng, n: int) -> dict:
    """What each network gets in a run: 512 px frames, padded 80x120 mouth crops, 224 px crops."""
    import skimage.data
    import skimage.transform
    face = skimage.data.astronaut()
    frames = [np.clip(face + rng.normal(0, 3, face.shape), 0, 255).astype(np.uint8) for _ in range(n)]
    mouth = (skimage.transform.resize(face[250:330, 200:320], (80, 120), preserve_range=True)).astype(np.uint8)
    return {"frames": frames, "mouths": [mouth] * n,
            "crops": rng.standard_normal((n, 3, 224, 224)).astype(np.float32)}


def networks(store: Path, runtime: str, device: str = "cpu") -> dict:
    """{network: callable(batch of n inputs)} on `runtime` and `device`, every network loaded."""
    from theval_mesh.backends.headpose.facexformer import LocalNetwork
    from theval_mesh.backends.headpose.retinaface_net import RetinaFaceDetector
    from theval_mesh.backends.inference.plan import resolve
    from theval_mesh.backends.quality.local_models import LocalModels
    from theval_mesh.pure.inference import InferenceOptions

    options = InferenceOptions(runtime=runtime, device=device)
    quality = LocalModels(store, options)
    for name in ("topiq_iaa", "musiq", "topiq_nr-face"):
        quality.load(name)
    detector = RetinaFaceDetector(store / "retinaface.h5", plan=resolve(options).on("retinaface"), store=store)
    facexformer = LocalNetwork(store, options)
    return {
        "topiq_iaa": lambda x: quality.scores("topiq_iaa", x["frames"]),
        "musiq": lambda x: quality.scores("musiq", x["mouths"]),
        "topiq_nr-face": lambda x: quality.scores("topiq_nr-face", x["frames"], each=True),
        "retinaface": lambda x: [detector.outputs(f)[0] for f in x["frames"]],  # its nine maps
        "facexformer": lambda x: facexformer.degrees(x["crops"]),
    }


def peak_memory(store: Path, runtime: str) -> dict:
    """A fresh process that loads every network on `runtime` and runs each once: its peak RSS."""
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so a child would report its
    # parent's peak
    code = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import numpy as np
from network_speed import inputs, networks
from pathlib import Path
def hwm():
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
nets = networks(Path({str(store)!r}), {runtime!r})
loaded = hwm()
x = inputs(np.random.default_rng(0), 4)
for f in nets.values():
    f(x)
print(json.dumps({{"loaded_mib": loaded, "peak_mib": hwm()}}))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    import torch

    from theval_mesh.backends import stand_in
    from theval_mesh.backends.inference.plan import resolve
    from theval_mesh.pure.inference import InferenceOptions

    memory_only = "--memory" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--memory"]
    batches = [int(b) for b in (args[0] if args else "1,8,32").split(",")]
    torch.set_num_threads(os.cpu_count() or 1)
    store = Path(tempfile.mkdtemp(prefix="theval-bench-networks-"))  # 4.5 GB with the exports: removed at exit
    atexit.register(shutil.rmtree, store, True)
    stand_in.write(store, 0, headpose=True)
    chosen = {n: resolve(InferenceOptions(device="cpu")).runtime(n) for n in ("topiq_iaa", "musiq")}
    print(f"{os.cpu_count()} cores, torch threads {torch.get_num_threads()}; stand-in weights seed 0; "
          f"auto on this CPU: {chosen}")
    loaded = {}
    for runtime in () if memory_only else RUNTIMES:
        t = time.perf_counter()
        loaded[runtime] = networks(store, runtime)  # the first load exports each network once
        print(f"{runtime}: every network loaded in {time.perf_counter() - t:.1f} s", flush=True)
    rng = np.random.default_rng(0)
    rows = {}
    for name in loaded.get("torch", ()):
        for batch in batches:
            x = inputs(rng, batch)
            for runtime in RUNTIMES:
                run = loaded[runtime][name]
                run(inputs(rng, 1))  # warm: first-call allocations
                t = time.perf_counter()
                run(x)
                rows[(name, batch, runtime)] = batch / (time.perf_counter() - t)
            line = "  ".join(f"{r} {rows[(name, batch, r)]:6.2f}" for r in RUNTIMES)
            best = max(RUNTIMES, key=lambda r: rows[(name, batch, r)])
            print(f"{name:<14} batch {batch:>2}: images/s  {line}   fastest {best} "
                  f"({rows[(name, batch, best)] / rows[(name, batch, 'torch')]:.2f}x torch)", flush=True)
    del loaded
    for runtime in ("torch", "auto"):
        # a run after the first: the exports and OpenVINO's compiled blobs are in the cache (the
        # first run also traces each network once, a one-off peak printed apart)
        first = peak_memory(store, runtime)
        memory = peak_memory(store, runtime)
        print(f"peak memory of the first run, {runtime} (exports made then): {first['peak_mib']:.0f} MiB")
        print(f"peak memory, every network loaded and run once, {runtime}: loaded {memory['loaded_mib']:.0f} MiB, "
              f"peak {memory['peak_mib']:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
