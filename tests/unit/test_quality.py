"""Quality backend: the real pyiqa loading path offline, the proxy, auto mode, mouth batching."""
from netguard import block_network

import numpy as np
import pytest
import scipy.ndimage as ndi
import skimage.data
import skimage.measure
import skimage.transform
from theval_mesh.common.errors import UserError, WeightsMissing
from theval_mesh.metrics.quality import MOUTH_BATCH, pad_to_batch
from theval_mesh.quality import QualityBackend, proxy
from theval_mesh.quality import weights_store as ws
from theval_mesh.quality.registry import METRIC_MODELS, MODELS

# Mouth boxes (x0, y0, x1, y1) that MediaPipe FaceMesh + metrics.quality.mouth_box give on the
# astronaut at each size (checked once by hand; fixed here so these tests need no landmarks).
MOUTH_BOX = {256: (91, 59, 132, 87), 512: (191, 128, 255, 164)}


# ---------------------------------------------------------------------------- fixtures
def astronaut(size):
    img = skimage.data.astronaut()
    if size != 512:
        img = skimage.transform.resize(img, (size, size), anti_aliasing=True, preserve_range=True)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def blurred(img, sigma):
    return np.clip(np.round(ndi.gaussian_filter(img.astype(float), (sigma, sigma, 0))),
                   0, 255).astype(np.uint8)


def noisy(img, sigma=20 / 255, seed=0):
    noise = np.random.default_rng(seed).normal(0, sigma * 255, img.shape)
    return np.clip(np.round(img + noise), 0, 255).astype(np.uint8)


def mouth(img, size):
    x0, y0, x1, y1 = MOUTH_BOX[size]
    return img[y0:y1, x0:x1]


def kit(size):
    """clean / blurred (sigma 2.5 at 256, scaled with the size) / noised (sigma 20/255)."""
    clean = astronaut(size)
    return {"clean": clean, "blur": blurred(clean, 2.5 * size / 256), "noise": noisy(clean)}


def fill(store, names):
    store.mkdir(parents=True, exist_ok=True)
    for name in names:
        (store / name).write_bytes(b"placeholder")


# ---------------------------------------------------------------------------- proxy
@pytest.mark.parametrize("size", [256, 512])
def test_proxy_scores_drop_under_blur_and_noise(size):
    qb = QualityBackend(mode="proxy")
    v = kit(size)
    frames = [v["clean"], v["blur"], v["noise"]]
    for method in (qb.global_aesthetic, qb.face_quality):
        clean, blur, noise = method(frames)
        assert blur < clean and noise < clean, (method.__name__, clean, blur, noise)
    # mouth crops of the degraded frames (one per batch: no padding)
    clean, blur, noise = (qb.mouth_quality([mouth(f, size)])[0] for f in frames)
    assert blur < clean and noise < clean, (clean, blur, noise)


def test_proxy_is_its_documented_formula():
    img = astronaut(256)
    y = proxy.luma(img)
    # the blur term is skimage's blur_effect (Crete et al. 2007)
    assert proxy.blur_effect(y) == pytest.approx(skimage.measure.blur_effect(y), abs=1e-5)
    # the noise term recovers a known noise level on a flat image
    flat = np.full((128, 128, 3), 128.0) + np.random.default_rng(1).normal(0, 8, (128, 128, 1))
    assert proxy.noise_sigma(proxy.luma(flat)) == pytest.approx(8, rel=0.1)
    assert proxy.score(img) == pytest.approx(
        100 * (1 - proxy.blur_effect(y)) / (1 + proxy.noise_sigma(y) / 10))
    assert 0 <= proxy.score(np.zeros((8, 8, 3), np.uint8)) <= 100  # degenerate input is finite


def test_proxy_provenance_is_labelled(tmp_path):
    qb = QualityBackend(mode="proxy", store=tmp_path)
    prov = qb.provenance()
    metrics = ("global_aesthetic", "mouth_quality", "face_quality")
    assert prov["mode"] == "proxy"
    assert prov["quality"] == {m: "proxy:sharpness-noise-v1" for m in metrics}
    assert "Crete" in prov["proxy_definition"]


# ---------------------------------------------------------------------------- modes
def test_paper_mode_with_an_empty_store_names_the_missing_files(tmp_path):
    with pytest.raises(WeightsMissing) as err:
        QualityBackend(mode="paper", store=tmp_path)
    msg = str(err.value)
    assert str(tmp_path) in msg and "theval weights fetch" in msg and "copy" in msg
    for name in ("cfanet_iaa_ava_swin-393b41b4.pth", "swin_base_patch4_window12_384_22kto1k.pth",
                 "musiq_koniq_ckpt-e95806b9.pth", "topiq_nr_cgfiqa_res50-0a8b8e4f.pth",
                 "detection_Resnet50_Final.pth"):
        assert name in msg
    assert "musiq_spaq" not in msg  # not needed by profile reference


def test_auto_picks_proxy_with_an_empty_store_and_paper_with_a_full_one(tmp_path):
    qb = QualityBackend(store=tmp_path)
    assert qb.resolved_mode == "proxy" and len(qb.notice.splitlines()) == 1
    assert "proxy:" in qb.notice and str(tmp_path) in qb.notice and "musiq_koniq" in qb.notice
    fill(tmp_path, [f.name for n in METRIC_MODELS["reference"].values() for f in MODELS[n].files])
    qb = QualityBackend(store=tmp_path)  # presence decides; nothing is loaded yet
    assert qb.resolved_mode == "paper" and "all weights found" in qb.notice
    qb = QualityBackend(store=tmp_path, profile="paper")  # musiq-spaq is still missing
    assert qb.resolved_mode == "proxy" and "musiq_spaq_ckpt-358bb6af.pth" in qb.notice


def test_bad_arguments_and_inputs_are_refused(tmp_path):
    with pytest.raises(UserError):
        QualityBackend(mode="fast")
    with pytest.raises(UserError):
        QualityBackend(profile="paperish")
    qb = QualityBackend(mode="proxy", store=tmp_path)
    with pytest.raises(ValueError):
        qb.global_aesthetic([np.zeros((8, 8, 3), np.float32)])
    with pytest.raises(ValueError):
        qb.mouth_quality([np.zeros((8, 8), np.uint8)])
    assert qb.face_quality([]).shape == (0,)


# ---------------------------------------------------------------------------- batching
def test_mouth_batches_score_the_padded_canvas(monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    crops = [rng.integers(0, 256, (int(rng.integers(20, 40)), int(rng.integers(30, 60)), 3),
                          dtype=np.uint8) for _ in range(MOUTH_BATCH * 2 + 3)]
    seen = []
    monkeypatch.setattr(proxy, "score", lambda im: seen.append(im) or float(len(seen)))
    qb = QualityBackend(mode="proxy", store=tmp_path)
    assert qb.mouth_quality(crops).shape == (len(crops),)
    expected = [pad_to_batch(crops[i:i + MOUTH_BATCH]) for i in range(0, len(crops), MOUTH_BATCH)]
    want = [canvas for batch in expected for canvas in batch]
    assert len(seen) == len(want) == len(crops)
    for got, canvas in zip(seen, want):
        np.testing.assert_array_equal(got, canvas)

    # paper mode hands the model the same padded batches
    batches = []
    qb.resolved_mode = "paper"
    monkeypatch.setattr(QualityBackend, "_run",
                        lambda self, name, images: batches.append((name, np.stack(images)))
                        or np.zeros(len(images)))
    qb.mouth_quality(crops)
    assert [name for name, _ in batches] == ["musiq"] * 3
    for (_, got), want in zip(batches, expected):
        np.testing.assert_array_equal(got, want)


def test_a_crop_score_depends_on_its_batch_only_through_the_padding(tmp_path):
    qb = QualityBackend(mode="proxy", store=tmp_path)
    small = mouth(astronaut(256), 256)
    smaller = small[:10, :10]
    larger = astronaut(256)[:60, :80]
    alone = qb.mouth_quality([small])[0]
    assert qb.mouth_quality([small, smaller])[0] == alone  # no larger crop: no border
    padded = qb.mouth_quality([small, larger])[0]
    assert padded != alone  # the black border counts, as in the reference
    assert padded == proxy.score(pad_to_batch([small, larger])[0])


def test_face_quality_is_nan_where_pyiqa_finds_no_face(monkeypatch, tmp_path):
    qb = QualityBackend(mode="proxy", store=tmp_path)
    qb.resolved_mode = "paper"
    calls = iter([AssertionError("No face detected in the input image."), 0.5])

    def run(self, name, images):
        assert name == "topiq_nr-face" and len(images) == 1  # one image at a time
        out = next(calls)
        if isinstance(out, Exception):
            raise out
        return np.array([out])

    monkeypatch.setattr(QualityBackend, "_run", run)
    scores = qb.face_quality([astronaut(256)] * 2)
    assert np.isnan(scores[0]) and scores[1] == 0.5


# ---------------------------------------------------------------------------- real pyiqa path
@pytest.fixture(scope="module")
def fake_store(tmp_path_factory):
    """FAKE weights: the published weights cannot be fetched here, so each file holds a randomly
    initialised state dict of the REAL architecture (pyiqa's CFANet / MUSIQ, timm Swin, facexlib
    RetinaFace and ParseNet), saved under the published file name. The face detector's output
    heads are set so that every anchor fires with fixed 5-point landmarks (a detector that always
    'finds' a face); every other tensor is random. Scores from these weights mean nothing."""
    import torch
    from facexlib.detection.retinaface import RetinaFace
    from facexlib.parsing.parsenet import ParseNet
    from pyiqa.archs import topiq_arch
    from pyiqa.archs.musiq_arch import MUSIQ
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    store = tmp_path_factory.mktemp("fake-weights")
    attempts = []
    with pytest.MonkeyPatch.context() as mp:
        block_network(mp, attempts)
        real_swin = topiq_arch.create_swin
        mp.setattr(topiq_arch, "create_swin",  # random Swin instead of its ImageNet download
                   lambda name, **kw: real_swin(name, **{**kw, "pretrained": False}))
        torch.manual_seed(0)
        for name, qmodel in MODELS.items():
            opts = {**DEFAULT_CONFIGS[name]["metric_opts"], "pretrained": False}
            opts.pop("type")
            files = {f.where: store / f.name for f in qmodel.files}
            if name.startswith("musiq"):
                torch.save(MUSIQ(**opts).state_dict(), files["main"])
                continue
            # model_name without "gfiqa": same tensors, no facexlib helper (and no download)
            net = topiq_arch.CFANet(**{**opts, "backbone_pretrain": False, "model_name": "fake"})
            torch.save({"params": net.state_dict()}, files["main"])
            if "torch_hub" in files:
                torch.save(net.semantic_model.state_dict(), files["torch_hub"])
        det = RetinaFace(network_name="resnet50", half=False, device="cpu").state_dict()
        landmarks = torch.tensor([-2, -1.5, 2, -1.5, 0, 0.5, -1.5, 2, 1.5, 2.0])  # eyes,nose,mouth
        for level in range(3):
            for head, bias in (("ClassHead", torch.tensor([-10.0, 10.0] * 2)),
                               ("BboxHead", torch.zeros(8)), ("LandmarkHead", landmarks.repeat(2))):
                det[f"{head}.{level}.conv1x1.weight"].zero_()
                det[f"{head}.{level}.conv1x1.bias"].copy_(bias)
        torch.save(det, store / "detection_Resnet50_Final.pth")
        torch.save(ParseNet(in_size=512, out_size=512, parsing_ch=19).state_dict(),
                   store / "parsing_parsenet.pth")
    assert not attempts
    return store


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["reference", "paper"])
def test_paper_mode_loads_every_model_from_the_store_offline(fake_store, no_network, tmp_path,
                                                             profile):
    import torch
    torch.set_num_threads(2)
    qb = QualityBackend(mode="paper", profile=profile, store=fake_store)
    frames = [astronaut(256), noisy(astronaut(256))]
    crops = [mouth(f, 256) for f in frames] + [frames[0][:50, :70]]
    metrics = {"mouth_quality": (qb.mouth_quality, crops)}
    if profile == "reference":  # the other two models are the same in both profiles
        metrics.update(global_aesthetic=(qb.global_aesthetic, frames),
                       face_quality=(qb.face_quality, frames[:1]))
    for metric, (method, inputs) in metrics.items():
        scores = method(inputs)
        assert scores.shape == (len(inputs),) and np.isfinite(scores).all(), metric

    assert not no_network, "a loader tried to reach the network"
    assert not (tmp_path / "caches").exists(), "a loader wrote to the torch/HF caches"
    prov = qb.provenance()
    assert prov["mode"] == "paper" and prov["profile"] == profile
    for metric, model_name in METRIC_MODELS[profile].items():
        if metric not in metrics:
            continue
        desc = prov["quality"][metric]
        assert desc.startswith(f"{model_name} pyiqa==")
        for f in MODELS[model_name].files:
            sha = ws.sha256_file(fake_store / f.name)
            assert prov["weights"][f.name]["sha256"] == sha
            assert (sha in desc) == f.affects_scores
            assert prov["weights"][f.name]["matches_published"] in (False, None)  # fakes


@pytest.mark.slow
def test_auto_mode_uses_the_models_when_the_store_is_full(fake_store, no_network):
    qb = QualityBackend(store=fake_store)
    assert qb.resolved_mode == "paper"
    assert np.isfinite(qb.mouth_quality([mouth(astronaut(256), 256)])).all()
    assert qb._metric("musiq") is qb._metric("musiq")  # loaded once per backend
    assert not no_network


@pytest.mark.slow
def test_a_checkpoint_that_does_not_cover_the_model_is_refused(fake_store, tmp_path, no_network):
    import torch
    store = tmp_path / "store"
    store.mkdir()
    for f in MODELS["topiq_nr-face"].files:
        (store / f.name).symlink_to(fake_store / f.name)
    (store / "topiq_nr_cgfiqa_res50-0a8b8e4f.pth").unlink()
    # a valid checkpoint that covers nothing
    torch.save({"params": {}}, store / "topiq_nr_cgfiqa_res50-0a8b8e4f.pth")
    from theval_mesh.quality.pyiqa_models import build
    with pytest.raises(WeightsMissing, match="lacks .* of topiq_nr-face's weights"):
        build(MODELS["topiq_nr-face"], store)  # pyiqa itself accepts it (strict=False)
    assert not no_network


@pytest.mark.slow
def test_a_missing_side_file_makes_pyiqa_fail_instead_of_downloading(fake_store, tmp_path,
                                                                      no_network):
    """If the store check were bypassed, the loader's download is refused, not attempted."""
    from theval_mesh.quality.pyiqa_models import build
    store = tmp_path / "store"
    store.mkdir()
    main = MODELS["topiq_iaa"].main.name  # present; the Swin backbone file is not
    (store / main).symlink_to(fake_store / main)
    with pytest.raises(WeightsMissing, match="tried to download .*swin_base_patch4_window12_384"):
        build(MODELS["topiq_iaa"], store)
    assert not no_network


def test_a_file_that_is_not_a_checkpoint_gives_a_user_error(tmp_path, no_network):
    from theval_mesh.quality.pyiqa_models import build
    fill(tmp_path, [MODELS["musiq"].main.name])  # e.g. an HTML error page saved by hand
    with pytest.raises(WeightsMissing, match="cannot build musiq from the weights store .*verify"):
        build(MODELS["musiq"], tmp_path)
    assert not no_network
