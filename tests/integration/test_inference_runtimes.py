"""The six networks on ONNX Runtime and OpenVINO give eager PyTorch's fp32 outputs, on the committed
stand-in weights (FAKE weights: the published ones cannot be fetched here; a network's arithmetic
does not depend on its weights' values), for the inputs the reference gives them: frames of any
size for the detectors, batches of any size, MUSIQ's zero-padded multi-scale patches of any image.

Tolerance: 1e-5 of each output's largest magnitude over the test's inputs (a stand-in MOS near 0
makes a value-by-value ratio meaningless; on real weights the scores are 1-10, 0-100 and 0-1).

Eager torch's outputs are computed once per input and compared with both runtimes (`yardstick`):
on two cores a 1024 px RetinaFace pass costs seconds."""
import numpy as np
import pytest
import skimage.data
import skimage.transform

from theval_mesh.backends.headpose.facexformer import DETECTOR, LocalNetwork
from theval_mesh.backends.headpose.retinaface_net import RetinaFaceDetector
from theval_mesh.backends.quality.local_models import LocalModels
from theval_mesh.pure import retinaface as rf
from theval_mesh.pure.inference import InferenceOptions

pytestmark = pytest.mark.slow
RUNTIMES = ("onnxruntime", "openvino")
TOLERANCE = 1e-5


def _close(torch_out, runtime_out, what: str):
    torch_out, runtime_out = np.asarray(torch_out, np.float64), np.asarray(runtime_out, np.float64)
    assert torch_out.shape == runtime_out.shape, what
    scale = np.abs(torch_out).max()
    if scale == 0:  # a stand-in detector's map that is zero everywhere: zero on the runtime too
        assert np.abs(runtime_out).max() <= 1e-6, what
        return 0.0
    worst = np.abs(torch_out - runtime_out).max() / scale
    assert worst <= TOLERANCE, f"{what}: {worst:.2e} of the output's scale"
    return worst


def _face(size, rng):
    """The astronaut's face at `size` (h, w) with some noise: stand-in detectors see a face-like frame."""
    img = skimage.transform.resize(skimage.data.astronaut(), size, preserve_range=True)
    return np.clip(img + rng.normal(0, 4, img.shape), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def yardstick():
    """(what, input) -> eager torch's output, computed by the first test that asks (the inputs are
    seeded, so both runtimes' tests ask for the same ones)."""
    memo = {}

    def get(key, compute):
        if key not in memo:
            memo[key] = compute()
        return memo[key]
    return get


@pytest.fixture(scope="module")
def quality_models(fake_store):
    return {name: LocalModels(fake_store, InferenceOptions(runtime=name)) for name in ("torch", *RUNTIMES)}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_topiq_iaa_on_any_batch_and_frame_size(quality_models, yardstick, runtime):
    rng = np.random.default_rng(1)
    frames = [_face((240, 320), rng) for _ in range(5)] + [_face((512, 512), rng)]
    ours, theirs = quality_models["torch"], quality_models[runtime]
    batches = (frames[:1], frames[:5], frames[5:])  # 1 and 5 frames; another size
    _close(yardstick("topiq_iaa", lambda: np.concatenate([ours.scores("topiq_iaa", b) for b in batches])),
           np.concatenate([theirs.scores("topiq_iaa", b) for b in batches]), f"topiq_iaa on {runtime}")
    assert theirs.inference(["topiq_iaa"])["runtimes"]["topiq_iaa"].startswith(runtime)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_musiq_on_padded_mouth_crops_of_any_size(quality_models, yardstick, runtime):
    from theval_mesh.pure.metrics.quality import pad_to_batch
    rng = np.random.default_rng(2)
    crops = [_face((int(h), int(w)), rng) for h, w in rng.integers(30, 90, size=(7, 2))]
    padded = list(pad_to_batch(crops))  # the reference's batch canvas: black right and bottom borders
    tall = [_face((150, 40), rng)]  # another canvas, another number of patches: a dynamic axis
    for name in ("musiq", "musiq-spaq"):
        ours = yardstick(name, lambda name=name: [quality_models["torch"].scores(name, images) for images in (padded, tall)])
        theirs = [quality_models[runtime].scores(name, images) for images in (padded, tall)]
        _close(np.concatenate(ours), np.concatenate(theirs), f"{name} on {runtime}")


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_topiq_nr_face_detects_aligns_and_scores_as_torch(quality_models, yardstick, runtime):
    """Each of its two networks within the tolerance on the same input; the whole score, where the
    detector's landmarks place the aligned face (a 1e-6 shift of a landmark moves the warp), within 1e-4."""
    import torch
    rng = np.random.default_rng(3)
    frames = [_face((512, 512), rng), _face((360, 480), rng), np.zeros((200, 200, 3), np.uint8)]
    torch_net = quality_models["torch"].load("topiq_nr-face").net
    runtime_net = quality_models[runtime].load("topiq_nr-face").net

    def maps(net, bgr):  # the network's maps, as detect_faces computes them (its thresholds aside)
        detector = net.face_helper.face_det
        image, _ = detector.transform(bgr, True)
        with torch.no_grad():
            return detector(image - detector.mean_tensor)

    for k, frame in enumerate(frames[:2]):  # facexlib's input: BGR float in 0..255 (pyiqa's x * 255, topiq_arch.py:459-460)
        bgr = np.ascontiguousarray(frame[..., ::-1].astype(np.float32))
        ours = yardstick(("facexlib maps", k), lambda bgr=bgr: maps(torch_net, bgr))
        for what, a, b in zip(("boxes", "scores", "landmarks"), ours, maps(runtime_net, bgr), strict=True):
            _close(a, b, f"facexlib RetinaFace {what} at {frame.shape[:2]} on {runtime}")
    faces = torch.rand(3, 3, 512, 512, generator=torch.Generator().manual_seed(3))  # CFANet on aligned 512x512 faces
    with torch.no_grad():
        _close(yardstick("cfanet", lambda: torch_net.forward_cross_attention(faces)),
               runtime_net.forward_cross_attention(faces), f"CFANet-R50 on {runtime}")
    ours = yardstick("topiq_nr-face", lambda: quality_models["torch"].scores("topiq_nr-face", frames, each=True))
    theirs = quality_models[runtime].scores("topiq_nr-face", frames, each=True)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))  # the same frames with a face
    assert not np.isnan(ours[:2]).any()
    kept = ~np.isnan(ours)
    assert np.abs(ours[kept] - theirs[kept]).max() <= 1e-4 * np.abs(ours[kept]).max()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_retinaface_maps_and_boxes_on_frames_of_any_size(headpose_store, yardstick, runtime):
    from theval_mesh.backends.inference.plan import NetworkPlan
    weights = headpose_store / "retinaface.h5"
    theirs = RetinaFaceDetector(weights, plan=NetworkPlan(runtime, "cpu", "fp32"), store=headpose_store)
    ours = yardstick("retinaface detector", lambda: RetinaFaceDetector(weights))  # its weights read once
    rng = np.random.default_rng(4)
    for size in ((360, 640), (700, 500)):  # landscape and portrait, upscaled to 1024 on the shorter side
        frame = _face(size, rng)
        a, height, width, scale = yardstick(("retinaface", size), lambda frame=frame: ours.outputs(frame))
        b, *same = theirs.outputs(frame)
        assert same == [height, width, scale] and min(height, width) == 1024
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"retina-face map {i} at {size} on {runtime}")
        # detect() is detect_faces on these maps: boxes truncated to int as the reference does, the same pixels
        first, second = rf.detect(a, height, width, scale), rf.detect(b, height, width, scale)
        assert first.keys() == second.keys()
        for face in first:
            assert first[face]["facial_area"] == second[face]["facial_area"]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_facexformer_on_any_batch(headpose_store, yardstick, runtime):
    theirs = LocalNetwork(headpose_store, InferenceOptions(runtime=runtime))
    rng = np.random.default_rng(5)
    batches = [rng.standard_normal((n, 3, 224, 224)).astype(np.float32) for n in (1, 13)]
    # the reference's batches of 128 run as passes of 8 on the CPU: one image, and more than a pass
    ours = yardstick("facexformer", lambda: np.concatenate(
        [LocalNetwork(headpose_store, InferenceOptions(runtime="torch")).degrees(b) for b in batches]))
    _close(ours, np.concatenate([theirs.degrees(b) for b in batches]), f"FaceXFormer on {runtime}")
    assert theirs.inference()["runtimes"] == {"facexformer": theirs.inference()["runtimes"]["facexformer"]}
    assert DETECTOR == "retinaface"


def test_an_export_is_made_once_and_reused(headpose_store, tmp_path, monkeypatch):
    """A load exports into the store's cache unless a file is there (test_facexformer_on_any_batch's
    load made it, when it ran first: one export of the 100 MB network, 40-70 s, not two), and every
    later load finds it, the other runtime's too (nothing traced again); another weight file is
    another export; a read-only store's exports go to the user's cache."""
    import torch.onnx

    from theval_mesh.backends.inference import export
    monkeypatch.delenv("THEVAL_COMPILED", raising=False)
    traced = []
    real = torch.onnx.export
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: (traced.append(1), real(*a, **k))[1])
    def files():  # (other tests may export FaceXFormer for other inputs into the same shared store)
        return set((headpose_store / export.FOLDER).glob("facexformer-*.onnx"))

    LocalNetwork(headpose_store, InferenceOptions(runtime="onnxruntime"))
    first, made = len(traced), files()
    LocalNetwork(headpose_store, InferenceOptions(runtime="openvino"))  # the same ONNX file
    assert first <= 1 and len(traced) == first and made and files() == made
    assert export.key("facexformer", "1", ["a"], [(1,)]) != export.key("facexformer", "1", ["b"], [(1,)])
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    unwritable = tmp_path / "unwritable-store"  # as for a read-only volume (root writes through modes)
    unwritable.mkdir()
    (unwritable / export.FOLDER).write_text("not a folder")
    assert export.cache_folder(unwritable) == tmp_path / "home" / ".cache" / "theval" / "compiled"
    assert export.cache_folder(tmp_path) == tmp_path / export.FOLDER
