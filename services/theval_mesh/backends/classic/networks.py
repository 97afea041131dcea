"""A classic metric's network weights in the weights store (registry.CLASSIC_MODELS): where the file
is, what it is (checksum, stand-in or not) and why a metric is skipped without it. The networks:
backends/classic/syncnet.py (LSE-C/LSE-D), fid.py (FID), fvd.py (FVD). A file that STAND-IN.json
records as a deterministic stand-in (backends/stand_in) passes the checksum check: it is never
the published file, and provenance and the store say so.
"""
from pathlib import Path

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import CLASSIC_MODELS
from theval_mesh.pure.errors import WeightsMissing


def weight_file(name: str, store=None) -> Path:
    """The network's weight file in the store, checked against its published checksum prefix when
    one exists; WeightsMissing with the one-line reason to show when absent or not that file."""
    m = CLASSIC_MODELS[name]
    f, root = m.main, ws.resolve(store)
    path = root / f.name
    if not path.is_file():
        raise WeightsMissing(
            f"{m.metrics} skipped: {m.network} weights {f.name} not in the weights store {root}; "
            f"`theval weights fetch --model {m.name}` on a machine with internet access and copy the "
            f"store here (or download {f.url} into it)")
    if f.sha256_prefix:
        sha = sha256_file(path)
        # a stand-in STAND-IN.json records (backends/stand_in) is accepted as what it is
        if sha.startswith(f.sha256_prefix) or ws.stand_in_seed(root, f.name, sha) is not None:
            return path
        raise WeightsMissing(f"{m.metrics} skipped: {path} is not the published {m.network} weights "
                             f"(sha256 does not start with {f.sha256_prefix}); fetch it again")
    return path


def load(name: str, store=None):
    """The network's weights: the TorchScript module of a TorchScript file (the I3D, the TorchScript
    FID Inception), else the state dict."""
    path = weight_file(name, store)
    import torch  # only when the weights are there: the landmark metrics do not need torch
    try:
        if CLASSIC_MODELS[name].torchscript:
            return torch.jit.load(str(path), map_location="cpu")
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file: torch raises many kinds
        raise WeightsMissing(f"{CLASSIC_MODELS[name].metrics} skipped: cannot load {path} "
                             f"({type(err).__name__}: {err})") from None


def describe(name: str, store=None) -> str:
    """`<file> sha256:<hex>`, with `(stand-in:<seed>)` when the store's file is a stand-in: what a
    classic value's provenance names."""
    path = weight_file(name, store)
    sha = sha256_file(path)
    seed = ws.stand_in_seed(store, path.name, sha)
    return f"{path.name} sha256:{sha}" + ("" if seed is None else f" ({ws.stand_in_label(seed)})")


def skip_reason(name: str, store=None) -> str:
    """Why the network's columns are empty: its weight file is missing or not the published one;
    "" when it is there (a file that then fails to load says so as its module loads it)."""
    try:
        weight_file(name, store)
    except WeightsMissing as err:
        return str(err)
    return ""
