"""Frames per second of each quality model and of FaceXFormer (head pose, 224x224 face crops),
in-process vs through a real Triton server, at batch sizes 1, 8 and 32 (images per call), in one
run on the same frames.

Triton runs on this machine's CPU (the wheel's tritonserver; on a GPU cluster the numbers differ
and are not claimed here). Calls alternate between the two paths, best of REPEATS each. Weights:
the store in $THEVAL_WEIGHTS when it holds every model's files, else the deterministic STAND-IN
weights (`theval weights stand-in`, as the tests use): the speed of a network does not depend on
its weights' values.

    .venv/bin/python bench/triton_throughput.py [SIZE]      # frame side in px, default 256
"""
import sys
import tempfile
from pathlib import Path

import numpy as np
import skimage.data
import skimage.transform
import torch
from common import best_of

from theval_mesh.backends.headpose.facexformer import LocalNetwork, normalised
from theval_mesh.backends.quality.local_models import LocalModels
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import MODELS
from theval_mesh.rpc.triton.client import TritonClient, TritonFaceXFormer, TritonModels
from theval_mesh.rpc.triton.repository import FACEXFORMER_MODEL, TRITON_NAME, default_repository
from theval_mesh.rpc.triton.repository import MODELS as TRITON_MODELS
from theval_mesh.rpc.triton.server import TritonServer

BATCHES = (1, 8, 32)
REPEATS = 3


def weights() -> tuple[Path, str]:
    store = ws.default_store()
    if not ws.missing_files(store) and not ws.missing_files(store, ["facexformer"]):
        return store, f"weights store {store}"
    from tests.support.fake_weights import write_fake_store  # importable: common put the root on sys.path
    fake = Path(tempfile.mkdtemp(prefix="theval-bench-fake-weights-"))
    return write_fake_store(fake, headpose=True), "STAND-IN weights (seeded, real architectures)"


def frames(n: int, size: int) -> list[np.ndarray]:
    base = skimage.transform.resize(skimage.data.astronaut(), (size, size), preserve_range=True)
    rng = np.random.default_rng(0)
    return [np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8) for _ in range(n)]


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    torch.set_num_threads(2)
    store, label = weights()
    images = frames(max(BATCHES), size)
    logdir = Path(tempfile.mkdtemp(prefix="theval-bench-triton-"))
    server = TritonServer(default_repository(), weights_store=store, models=[
        m for m in ("topiq_iaa", "topiq_nr_face", "musiq", "musiq_spaq", FACEXFORMER_MODEL)], log=open(logdir / "triton.log", "w"))
    print(f"starting Triton (log {logdir / 'triton.log'}); {label}; frames {size}x{size}", flush=True)
    server.start()
    client = TritonClient(server.address)
    local, remote = LocalModels(store), TritonModels(client)
    rows = []
    try:
        for name in MODELS:
            each = TRITON_MODELS[TRITON_NAME[name]].each  # topiq_nr-face: one image at a time
            local.scores(name, images[:1], each)  # load and warm up both paths
            remote.scores(name, images[:1], each)
            for b in BATCHES:
                batch = images[:b]
                t_local = best_of(lambda name=name, batch=batch, each=each: local.scores(name, batch, each), REPEATS)
                t_triton = best_of(lambda name=name, batch=batch, each=each: remote.scores(name, batch, each), REPEATS)
                rows.append((name, b, b / t_local, b / t_triton))
                print(f"  {name:<14} batch {b:>2}: in-process {b / t_local:7.2f} fps, triton {b / t_triton:7.2f} fps",
                      flush=True)
        # FaceXFormer: normalised 224x224 crops (the detector, which makes them, stays in the service)
        crops = normalised([im[:224, :224] if size >= 224 else
                            skimage.transform.resize(im, (224, 224), preserve_range=True).astype(np.uint8)
                            for im in images])
        local_fx, remote_fx = LocalNetwork(store), TritonFaceXFormer(client)
        local_fx.degrees(crops[:1])
        remote_fx.degrees(crops[:1])
        for b in BATCHES:
            t_local = best_of(lambda b=b: local_fx.degrees(crops[:b]), REPEATS)
            t_triton = best_of(lambda b=b: remote_fx.degrees(crops[:b]), REPEATS)
            rows.append(("facexformer", b, b / t_local, b / t_triton))
            print(f"  {'facexformer':<14} batch {b:>2}: in-process {b / t_local:7.2f} fps, triton {b / t_triton:7.2f} fps",
                  flush=True)
    finally:
        client.close()
        server.close()
    print("\n| model | batch | in-process fps | Triton fps | Triton / in-process |\n|---|---|---|---|---|")
    for name, b, fl, ft in rows:
        print(f"| {name} | {b} | {fl:.2f} | {ft:.2f} | {ft / fl:.2f} |")


if __name__ == "__main__":
    main()
