"""Stand-in weight files of FID and FVD (backends/stand_in.py's rules and STAND-IN.json marker):
`pt_inception-2015-12-05-6726825d.pth` (the FID Inception state dict, fid.stand_in_state) and
`i3d_torchscript.pt` (our I3D, i3d.py, scripted and saved as TorchScript). `write_file` gives one
file and its marker entry (for stand_in.write to merge into its marker); `write` writes both and
merges them into the store's STAND-IN.json."""
from pathlib import Path

from theval_mesh.backends.checksum import sha256_file
from theval_mesh.backends.stand_in import _tensors, values_digest
from theval_mesh.backends.weights.registry import LEGACY_MODELS

NETWORKS = ("fid-inception", "fvd-i3d")


def write_file(store: Path, name: str, seed: int) -> tuple[str, dict]:
    """Write the stand-in file of LEGACY_MODELS[name] (fid-inception or fvd-i3d) into `store`;
    returns (file name, {"values_sha256", "sha256"}), the marker's entry for it."""
    import torch

    from theval_mesh.backends.legacy import fid, i3d

    fname = LEGACY_MODELS[name].main.name
    path = Path(store) / fname
    path.parent.mkdir(parents=True, exist_ok=True)
    if name == "fid-inception":
        state = fid.stand_in_state(seed)
        torch.save(_tensors(state), path)
    elif name == "fvd-i3d":
        state = i3d.write_torchscript(path, seed)
    else:
        raise ValueError(f"no stand-in for {name!r}; known: {', '.join(NETWORKS)}")
    return fname, {"values_sha256": values_digest(state), "sha256": sha256_file(path)}


def write(store: Path, seed: int = 0, names=NETWORKS) -> dict:
    """Write the stand-ins of `names` and record them in STAND-IN.json (stand_in.write, which merges
    them with the entries of the same seed already there); returns the marker."""
    from theval_mesh.backends import stand_in

    return stand_in.write(Path(store), seed, models=(), legacy=list(names))
