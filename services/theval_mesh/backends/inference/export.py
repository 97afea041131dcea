"""Each network exported once to ONNX, cached beside the weights it was exported from.

The file's name is a digest of everything that decides its contents: the network's name and cut
(networks.py says where each network's graph starts and ends), the sha256 of every weight file
in it, the input shapes it was traced on, and the exporter's version (torch, opset). Another
weight file or another torch is another file; the cache is never asked whether it is stale.

Where: `$THEVAL_COMPILED` when set (one folder for every store on a machine), else
`<weights store>/.compiled/`, or, when the store is read-only (a mounted volume),
`~/.cache/theval/compiled`, or the temporary folder's `theval-compiled` (a container whose root
is read-only has a writable /tmp). Written to a temporary name and renamed, so two
processes exporting at once both end with a whole file."""
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import threading
import warnings
from pathlib import Path

from theval_mesh.pure.errors import UserError

OPSET = 17
FOLDER = ".compiled"
_LOCK = threading.Lock()


def exporter() -> str:
    import torch
    return f"torch=={torch.__version__.split('+')[0]} torchscript-onnx opset {OPSET}"


def key(name: str, cut: str, weights_sha: list[str], inputs: list[tuple]) -> str:
    parts = {"network": name, "cut": cut, "weights": sorted(weights_sha), "inputs": [list(map(str, i)) for i in inputs],
             "exporter": exporter()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def cache_folder(store: Path) -> Path:
    """$THEVAL_COMPILED, else the first writable of: beside the weights, the user's cache, the
    temporary folder."""
    chosen = os.environ.get("THEVAL_COMPILED")
    if chosen:
        folder = Path(chosen).expanduser()
        if not _writable(folder):
            raise UserError(f"THEVAL_COMPILED={chosen!r}: cannot write there (the networks' exports are "
                            "cached in it); name a writable folder")
        return folder
    candidates = (Path(store) / FOLDER, Path.home() / ".cache" / "theval" / "compiled",
                  Path(tempfile.gettempdir()) / "theval-compiled")
    folder = next((c for c in candidates if _writable(c)), None)
    if folder is None:
        raise UserError(f"nowhere to cache the networks' exports ({', '.join(map(str, candidates))} are not "
                        "writable): set THEVAL_COMPILED to a writable folder, or use --runtime torch")
    return folder


def exported(store: Path, name: str, cut: str, weights_sha: list[str], module, example: tuple,
             input_names: list[str], output_names: list[str], dynamic_axes: dict) -> Path:
    """The ONNX file of `module` traced on `example`, exported now unless already cached."""
    import torch

    shapes = [(tuple(t.shape), str(t.dtype)) for t in example]
    path = cache_folder(store) / f"{name}-{key(name, cut, weights_sha, shapes)}.onnx"
    with _LOCK:
        if path.is_file():
            return path
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".onnx.part", dir=path.parent)
        os.close(fd)
        print(f"exporting {name} to ONNX once (cached in {path.parent})", file=sys.stderr, flush=True)
        try:
            # The tracer's warnings are about shapes it keeps as constants: the cuts keep only those
            # that are (networks.py), and the tests run every cut on other shapes.
            with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, example, tmp, dynamo=False, opset_version=OPSET,
                                  input_names=input_names, output_names=output_names,
                                  dynamic_axes=dynamic_axes, do_constant_folding=True)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return path
