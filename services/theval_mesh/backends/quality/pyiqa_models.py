"""Build a pyiqa quality model from the weights store, with no network access.

pyiqa 0.1.16 downloads at construction time even with `pretrained=False`: topiq_iaa's Swin backbone
(timm -> torch.hub `<hub dir>/checkpoints/`) and topiq_nr-face's facexlib detector and parser
(`<pyiqa cache dir>/`, a path pyiqa fixes at import from $TORCH_HOME). So, while a model is built:
  - a throw-away "loader view" directory links the store's files where those loaders look, and
    torch.hub's dir and pyiqa's cache dir point at it;
  - every download function those loaders call raises WeightsMissing instead (never a retry);
  - the main checkpoint goes in through pyiqa's own `pretrained_model_path`, then we check that it
    covers every parameter (pyiqa loads CFANet checkpoints with strict=False, so a wrong file would
    silently leave random weights).
The pyiqa metric and its options come from the registry (`QualityModel.name`, `create_kwargs`:
create_metric's public kwargs, which override pyiqa's table); a face model must come out with
pyiqa's face alignment on (`aligns_faces`), or the build fails.
This patches module globals, so builds are serialised by a lock.
"""
import contextlib
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from theval_mesh.backends.weights.registry import QualityModel
from theval_mesh.pure.errors import UserError, WeightsMissing

_BUILD_LOCK = threading.Lock()


def _link(src: Path, dst: Path) -> None:
    try:
        os.symlink(src.resolve(), dst)
    except OSError:  # no symlinks (some filesystems): copy
        shutil.copyfile(src, dst)


def _refuse_download(url, dst, *args, **kwargs):
    raise WeightsMissing(f"pyiqa tried to download {url} (to {dst}): the weights store lacks a "
                         "file the installed pyiqa needs; run `theval weights status`")


@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def offline_build(store: Path, qmodel: QualityModel):
    """pyiqa/timm/facexlib find qmodel's side files in `store` and cannot download anything."""
    import facexlib.utils.misc
    import pyiqa.archs.topiq_arch
    import pyiqa.utils.download_util
    import torch.hub

    with _BUILD_LOCK, tempfile.TemporaryDirectory(prefix="theval-loader-view-") as tmp:
        hub = Path(tmp) / "hub"
        dirs = {"torch_hub": hub / "checkpoints", "facexlib": hub / "pyiqa"}
        for d in dirs.values():
            d.mkdir(parents=True)
        for f in qmodel.files:
            if f.where in dirs and (store / f.name).is_file():
                _link(store / f.name, dirs[f.where] / f.name)
        old_hub = getattr(torch.hub, "_hub_dir", None)
        torch.hub.set_dir(str(hub))
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(_patched(pyiqa.archs.topiq_arch, "DEFAULT_CACHE_DIR",
                                             str(dirs["facexlib"])))
                for module in (torch.hub, pyiqa.utils.download_util, facexlib.utils.misc):
                    stack.enter_context(_patched(module, "download_url_to_file", _refuse_download))
                yield
        finally:
            torch.hub._hub_dir = old_hub


def _checkpoint_keys(path: Path, weight_key: str | None) -> set:
    import torch
    from pyiqa.archs.arch_util import clean_state_dict

    try:  # mmap: only the key names are needed, not 400 MB of tensors
        state = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
    except RuntimeError:  # legacy (non-zip) checkpoint
        state = torch.load(path, map_location="cpu", weights_only=False)
    if weight_key is not None:
        state = state[weight_key]
    return set(clean_state_dict(state))


def aligns_faces(net) -> bool:
    """Whether a pyiqa CFANet aligns and crops the face before scoring: it has the facexlib
    helper and alignment is on (pyiqa 0.1.16: constructor option `align_crop_face`, default True,
    archs/topiq_arch.py:263, 281, 629-631; pyiqa 0.1.13 has no such attribute and aligns whenever
    it built the helper, archs/topiq_arch.py:325 and 475-477)."""
    return getattr(net, "face_helper", None) is not None and getattr(net, "align_crop_face", True)


def build(qmodel: QualityModel, store: Path, device: str = "cpu"):
    """pyiqa InferenceModel of qmodel with the store's weights, in eval mode."""
    import pyiqa

    main = store / qmodel.main.name
    try:
        # pyiqa prints "Loading pretrained model ..." on stdout, which belongs to the CLI's output.
        with offline_build(store, qmodel), contextlib.redirect_stdout(sys.stderr):
            metric = pyiqa.create_metric(qmodel.name, device=device,
                                         pretrained_model_path=str(main), **qmodel.create_kwargs)
        keys = _checkpoint_keys(main, qmodel.weight_key)
    except WeightsMissing:
        raise
    except Exception as err:  # truncated file, wrong tensor shapes, not a checkpoint at all
        files = ", ".join(f.name for f in qmodel.files)
        raise WeightsMissing(
            f"cannot build {qmodel.name} from the weights store {store} ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}); check {files} with "
            "`theval weights verify`") from err
    # Learned tensors only: index tables and attention masks are rebuilt by the constructor.
    net = metric.net
    if qmodel.aligns_faces and not aligns_faces(net):
        raise UserError(
            f"pyiqa {pyiqa.__version__} builds {qmodel.name} (model_name "
            f"{getattr(net, 'model_name', '?')!r}) without its facexlib face alignment, so its "
            "scores would not be those of the reference; install the pyiqa of constraints.txt")
    needed = {n for n, _ in net.named_parameters()}
    needed |= {n for n, _ in net.named_buffers() if "running_" in n}
    uncovered = needed - keys
    if uncovered:
        raise WeightsMissing(
            f"{main} lacks {len(uncovered)} of {qmodel.name}'s weights (e.g. {min(uncovered)}): "
            "is it the right file? Check it with `theval weights verify`")
    metric.eval()
    return metric
