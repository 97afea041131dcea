"""Quality backend: the real pyiqa loading path offline, the proxy, auto mode, mouth batching."""
import contextlib

import numpy as np
import pytest
import scipy.ndimage as ndi
import skimage.data
import skimage.measure
import skimage.transform

from theval_mesh.backends.quality import QualityBackend, inference, proxy
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import METRIC_MODELS, MODELS
from theval_mesh.pure.errors import UserError, WeightsMissing
from theval_mesh.pure.metrics.quality import MOUTH_BATCH, pad_to_batch

# Mouth boxes (x0, y0, x1, y1) that MediaPipe FaceMesh + pure.metrics.quality.mouth_box give on the
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
    # a larger image is scored as seen at 256 px on its longer side
    big = astronaut(512)[:, :384]
    assert proxy.scaled(big).shape == (256, 192, 3)
    assert proxy.score(big) == proxy.score(proxy.scaled(big)) != proxy.score(big[::2, ::2])


def _blas_kernels() -> list[str]:
    """The kernels of numpy's OpenBLAS this CPU can run (another one dies of SIGILL): SSE3's
    always, AVX's, AVX2's and AVX-512's where the CPU has them (/proc/cpuinfo's flags)."""
    flags = set()
    with contextlib.suppress(OSError):
        flags = set(next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split())
    return ["Prescott"] + [core for core, flag in (("Sandybridge", "avx"), ("Haswell", "avx2"),
                                                          ("SkylakeX", "avx512f")) if flag in flags]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_proxy_scores_do_not_depend_on_the_blas_kernel(threads):
    """The same frames give the same proxy scores whichever kernel OpenBLAS picks (CPU type,
    threads): the containers' scores once differed from the host's in the 5th digit."""
    import json
    import subprocess
    import sys
    code = ("import json, numpy as np, skimage.data, skimage.transform; from theval_mesh.backends.quality import proxy; "
            "img = skimage.data.astronaut(); rng = np.random.default_rng(2); "
            "frames = [np.clip(img + rng.normal(0, s, img.shape), 0, 255).astype(np.uint8) for s in (0, 3, 9)]; "
            "print(json.dumps([proxy.score(f) for f in frames] + [proxy.score(f[:300, :317]) for f in frames]))")
    scores = []
    for core in _blas_kernels():
        env = {**__import__("os").environ, "OPENBLAS_CORETYPE": core, "OPENBLAS_NUM_THREADS": threads,
               "OMP_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        scores.append(json.loads(done.stdout))
    assert len(scores) >= 2 and all(s == scores[0] for s in scores)


def test_proxy_provenance_is_labelled(tmp_path):
    qb = QualityBackend(mode="proxy", store=tmp_path)
    prov = qb.provenance()
    metrics = ("global_aesthetic", "mouth_quality", "face_quality")
    assert prov["mode"] == "proxy"
    assert prov["quality"] == {m: "proxy:sharpness-noise-v2" for m in metrics}
    assert "Crete" in prov["proxy_definition"]


# ---------------------------------------------------------------------------- modes
def test_paper_mode_with_an_empty_store_names_the_missing_files(tmp_path):
    with pytest.raises(WeightsMissing) as err:
        QualityBackend(mode="paper", store=tmp_path)
    msg = str(err.value)
    assert str(tmp_path) in msg and "theval weights fetch" in msg and "copy" in msg
    for name in ("cfanet_iaa_ava_swin-393b41b4.pth", "swin_base_patch4_window12_384_22kto1k.pth",
                 "musiq_koniq_ckpt-e95806b9.pth", "topiq_nr_gfiqa_res50-d76bf1ae.pth",
                 "detection_Resnet50_Final.pth"):
        assert name in msg
    assert "musiq_spaq" not in msg  # not needed by profile reference
    assert "cgfiqa" not in msg  # faces are scored with pyiqa 0.1.13's GFIQA checkpoint


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
    monkeypatch.setattr(qb.models, "scores",
                        lambda name, images, each: batches.append((name, np.stack(images)))
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


def test_face_quality_is_nan_where_pyiqa_finds_no_face():
    """score_each (in-process and in the Triton model): one image at a time, NaN on pyiqa's
    no-face assertion, any other error raised. `metric` stands in for a pyiqa model."""
    import torch
    seen = []

    def metric(batch):
        seen.append(tuple(batch.shape))
        if len(seen) == 1:
            raise AssertionError("No face detected in the input image.")
        if len(seen) == 3:
            raise AssertionError("something else")
        return torch.tensor([0.5])

    scores = inference.score_each(metric, [astronaut(64)] * 2)
    assert np.isnan(scores[0]) and scores[1] == 0.5
    assert seen == [(1, 3, 64, 64)] * 2  # one image at a time, as float CHW
    with pytest.raises(AssertionError, match="something else"):
        inference.score_each(metric, [astronaut(64)])


def test_face_quality_is_scored_one_image_at_a_time(monkeypatch, tmp_path):
    qb = QualityBackend(mode="proxy", store=tmp_path)
    qb.resolved_mode = "paper"
    calls = []
    monkeypatch.setattr(qb.models, "scores",
                        lambda name, images, each: calls.append((name, len(images), each))
                        or np.zeros(len(images)))
    qb.face_quality([astronaut(64)] * 3)
    assert calls == [("topiq_nr-face", 3, True)]


# ---------------------------------------------------------------------------- real pyiqa path
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
    assert qb.models.load("musiq") is qb.models.load("musiq")  # loaded once per backend
    assert not no_network


@pytest.mark.slow
def test_a_checkpoint_that_does_not_cover_the_model_is_refused(fake_store, tmp_path, no_network):
    import torch
    store = tmp_path / "store"
    store.mkdir()
    for f in MODELS["topiq_nr-face"].files:
        (store / f.name).symlink_to(fake_store / f.name)
    (store / "topiq_nr_gfiqa_res50-d76bf1ae.pth").unlink()
    # a valid checkpoint that covers nothing
    torch.save({"params": {}}, store / "topiq_nr_gfiqa_res50-d76bf1ae.pth")
    from theval_mesh.backends.quality.pyiqa_models import build
    with pytest.raises(WeightsMissing, match="lacks .* of topiq_nr-face's weights"):
        build(MODELS["topiq_nr-face"], store)  # pyiqa itself accepts it (strict=False)
    assert not no_network


@pytest.mark.slow
def test_a_missing_side_file_makes_pyiqa_fail_instead_of_downloading(fake_store, tmp_path,
                                                                      no_network):
    """If the store check were bypassed, the loader's download is refused, not attempted."""
    from theval_mesh.backends.quality.pyiqa_models import build
    store = tmp_path / "store"
    store.mkdir()
    main = MODELS["topiq_iaa"].main.name  # present; the Swin backbone file is not
    (store / main).symlink_to(fake_store / main)
    with pytest.raises(WeightsMissing, match="tried to download .*swin_base_patch4_window12_384"):
        build(MODELS["topiq_iaa"], store)
    assert not no_network


def test_a_file_that_is_not_a_checkpoint_gives_a_user_error(tmp_path, no_network):
    from theval_mesh.backends.quality.pyiqa_models import build
    fill(tmp_path, [MODELS["musiq"].main.name])  # e.g. an HTML error page saved by hand
    with pytest.raises(WeightsMissing, match="cannot build musiq from the weights store .*verify"):
        build(MODELS["musiq"], tmp_path)
    assert not no_network


@pytest.mark.parametrize("profile", ["reference", "paper"])
def test_the_proxy_takes_frames_one_at_a_time_with_the_scores_of_batches_of_64(profile, tmp_path, monkeypatch):
    """The frame pass hands the proxy full frames (and faces) as they come (frame_batch 1); the
    models, and every mouth crop, keep the reference's batches of 64. Real FaceMesh on a real clip
    of 100 frames: the same series as with batches of 64."""
    from theval_mesh.backends.media.decode import MediaReader
    from theval_mesh.core.frame_pass import run_frame_pass
    from theval_mesh.pure.settings import RunSettings
    from theval_mesh.synth import generate_kit
    generate_kit(tmp_path, seed=5, n_clips=1, duration_s=4.0, size=128, variants=())
    video = sorted(tmp_path.rglob("*.mp4"))[0]
    settings = RunSettings(quality="proxy", profile=profile, single_pass=True)
    backend = QualityBackend("proxy", profile=profile, store=tmp_path / "empty")
    assert backend.frame_batch() == 1

    def series():
        out = run_frame_pass(MediaReader(video), settings, backend)
        return out.global_aesthetic, out.face_quality, out.mouth_quality
    one_by_one = series()
    monkeypatch.setattr(QualityBackend, "frame_batch", lambda self: 64)
    batched = series()
    assert len(one_by_one[0]) == 100 and len(one_by_one[2]) > 64
    assert [np.array(s).tolist() for s in one_by_one] == [np.array(s).tolist() for s in batched]
