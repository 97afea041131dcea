"""Face quality, in both profiles, is pyiqa 0.1.13's `topiq_nr-face` (CFANet on GFIQA, faces
aligned with facexlib), built with the installed pyiqa, whatever checkpoint that pyiqa's own
`topiq_nr-face` names (0.1.16: CGFIQA, which THEval does not use).

The weights are FAKE (tests/support/fake_weights.py): random tensors of the real architectures under the
published file names, so the scores mean nothing; the loading, alignment and scoring code is
pyiqa's and facexlib's own. No test touches the network."""
import dataclasses

import numpy as np
import pytest
import skimage.data
import skimage.transform

from theval_mesh.backends.quality import QualityBackend
from theval_mesh.backends.quality.local_models import LocalModels
from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import METRIC_MODELS, MODELS
from theval_mesh.pure.errors import UserError, WeightsMissing
from theval_mesh.pure.inference import InferenceOptions

FACE = "topiq_nr-face"  # the name THEval's reference code passes to pyiqa.create_metric

# pyiqa 0.1.13 (not installed; the version THEval's reference pins, requirements.txt line 31),
# copied by hand from its wheel:
#   pyiqa/archs/topiq_arch.py:40
#       'topiq_nr_gfiqa_res50': get_url_from_name('topiq_nr_gfiqa_res50-d76bf1ae.pth'),
#   pyiqa/archs/arch_util.py:161-178 get_url_from_name(name) with the default store_base
#       "hugging_face": hf_hub_url(repo_id="chaofengc/IQA-PyTorch-Weights", filename=name)
#   pyiqa/default_model_configs.py:509-519
#       'topiq_nr-face': {'metric_opts': {'type': 'CFANet', 'semantic_model_name': 'resnet50',
#           'model_name': 'topiq_nr_gfiqa_res50', 'use_ref': False, 'test_img_size': 512}, ...}
#   pyiqa/archs/topiq_arch.py:325-334 (model_name == 'topiq_nr_gfiqa_res50') FaceRestoreHelper(1,
#       face_size=512, crop_ratio=(1, 1), det_model='retinaface_resnet50', save_ext='png',
#       use_parse=True, model_rootpath=DEFAULT_CACHE_DIR)
#   pyiqa/archs/topiq_arch.py:453-467 and 475-477: forward aligns (align_crop_face=True):
#       get_face_landmarks_5(only_center_face=True, eye_dist_threshold=5), align_warp_face()
PYIQA_0_1_13 = {
    "file": "topiq_nr_gfiqa_res50-d76bf1ae.pth",
    "url": "https://huggingface.co/chaofengc/IQA-PyTorch-Weights/resolve/main/"
           "topiq_nr_gfiqa_res50-d76bf1ae.pth",
    "sha256_prefix": "d76bf1ae",
    "metric_opts": {"type": "CFANet", "semantic_model_name": "resnet50",
                    "model_name": "topiq_nr_gfiqa_res50", "use_ref": False, "test_img_size": 512},
    "face_size": 512,
}
# pyiqa 0.1.16's 'topiq_nr-face' checkpoint (archs/topiq_arch.py:45, default_model_configs.py
# :516-526): the file a store filled by that pyiqa would hold. Never loaded by THEval.
CGFIQA_FILE = "topiq_nr_cgfiqa_res50-0a8b8e4f.pth"


def astronaut(shape=None):
    img = skimage.data.astronaut()  # a real face, 512 x 512
    if shape is not None:
        img = skimage.transform.resize(img, shape, anti_aliasing=True, preserve_range=True)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def placeholders(store, names):
    for name in names:
        (store / name).write_bytes(b"placeholder, never loaded")


def write_fake_cgfiqa(store):
    """A FAKE CGFIQA checkpoint next to the fake GFIQA one: the same network (same keys and
    shapes, as the real two files), other values; a file that loads fine if wrongly picked."""
    import torch
    state = torch.load(store / PYIQA_0_1_13["file"], weights_only=False)["params"]
    torch.save({"params": {k: v + 1 if v.is_floating_point() else v for k, v in state.items()}},
               store / CGFIQA_FILE)


@pytest.fixture(scope="module")
def face_store(tmp_path_factory):
    """FAKE weights of the face model (random init, see fake_weights.py), plus a fake CGFIQA file
    that must never be loaded; the other models' files are placeholders, present so that paper
    mode starts, never loaded by these tests."""
    from tests.support.fake_weights import write_fake_store
    store = write_fake_store(tmp_path_factory.mktemp("fake-face-weights"), [FACE])
    write_fake_cgfiqa(store)
    placeholders(store, ws.missing_files(store))
    return store


def link(store, src, names):
    store.mkdir(parents=True, exist_ok=True)
    for name in names:
        (store / name).symlink_to(src / name)


# ---------------------------------------------------------------------------- registry
def test_topiq_nr_face_is_pyiqa_0_1_13s_gfiqa_model():
    from pyiqa.default_model_configs import DEFAULT_CONFIGS
    qmodel = MODELS[FACE]
    assert qmodel.main.name == PYIQA_0_1_13["file"]
    assert qmodel.main.url == PYIQA_0_1_13["url"]
    assert qmodel.main.sha256_prefix == PYIQA_0_1_13["sha256_prefix"]
    assert qmodel.weight_key == "params"  # load_pretrained_network(..., weight_keys='params')
    # the facexlib detector and parser that FaceRestoreHelper loads
    assert {f.name for f in qmodel.files if f.where == "facexlib"} == \
        {"detection_Resnet50_Final.pth", "parsing_parsenet.pth"}
    # the installed pyiqa's metric, with the registry's kwargs over its table (as
    # InferenceModel does: net_opts.update(kwargs)), is 0.1.13's network
    net_opts = {**DEFAULT_CONFIGS[qmodel.name]["metric_opts"], **qmodel.create_kwargs}
    assert net_opts.pop("backbone_pretrain") is False  # every backbone weight is in the file
    assert net_opts == PYIQA_0_1_13["metric_opts"]
    assert qmodel.aligns_faces


def test_both_profiles_score_faces_with_gfiqa_and_nothing_uses_cgfiqa():
    assert METRIC_MODELS["reference"]["face_quality"] == FACE
    assert METRIC_MODELS["paper"]["face_quality"] == FACE
    assert not [f.name for m in MODELS.values() for f in m.files if "cgfiqa" in f.name]
    assert not [name for name in MODELS if "gfiqa" in name]  # one face model, under pyiqa's name


def test_weights_status_lists_the_gfiqa_file_once(tmp_path, capsys):
    import argparse

    from theval_mesh.commands import weights as weights_command
    parser = argparse.ArgumentParser(prog="theval")
    weights_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["weights", "status", "--store", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines()
            if PYIQA_0_1_13["file"] in line and not line.startswith("missing")]
    assert len(rows) == 1
    assert rows[0].split()[:2] == [FACE, PYIQA_0_1_13["file"]] and " NO " in rows[0]
    assert f"missing: download {PYIQA_0_1_13['url']} to {tmp_path / PYIQA_0_1_13['file']}" in out
    assert CGFIQA_FILE not in out
    rows = ws.status(tmp_path, [FACE])
    assert [r.file for r in rows] == [f.name for f in MODELS[FACE].files]


# ---------------------------------------------------------------------------- missing weights
@pytest.mark.parametrize("profile", ["reference", "paper"])
def test_a_store_with_the_cgfiqa_file_instead_lacks_the_face_model(tmp_path, profile):
    """A store filled for pyiqa 0.1.16's topiq_nr-face (CGFIQA) does not serve THEval's."""
    store = tmp_path / "store"
    store.mkdir()
    others = {f.name for name in ("topiq_iaa", "musiq", "musiq-spaq") for f in MODELS[name].files}
    facexlib = [f.name for f in MODELS[FACE].files if f.where == "facexlib"]
    placeholders(store, sorted(others) + facexlib + [CGFIQA_FILE])
    with pytest.raises(WeightsMissing) as err:
        QualityBackend(mode="paper", profile=profile, store=store)
    msg = str(err.value)
    assert f"missing from the store {store}: {PYIQA_0_1_13['file']};" in msg  # that file alone
    assert CGFIQA_FILE not in msg
    auto = QualityBackend(profile=profile, store=store)
    assert auto.resolved_mode == "proxy" and PYIQA_0_1_13["file"] in auto.notice
    assert LocalModels(store).unavailable([FACE]) is not None


def test_building_the_face_model_from_a_cgfiqa_only_store_fails_offline(face_store, tmp_path,
                                                                          no_network):
    from theval_mesh.backends.quality.pyiqa_models import build
    store = tmp_path / "store"
    link(store, face_store, [CGFIQA_FILE] + [f.name for f in MODELS[FACE].files
                                             if f.where == "facexlib"])
    assert ws.missing_files(store, [FACE]) == [PYIQA_0_1_13["file"]]
    with pytest.raises(WeightsMissing, match=f"cannot build {FACE} .*{PYIQA_0_1_13['file']}"):
        build(MODELS[FACE], store)
    assert not no_network


# ---------------------------------------------------------------------------- the real pyiqa path
@pytest.mark.parametrize("profile", ["reference", "paper"])
def test_face_quality_is_built_from_the_fake_gfiqa_file(face_store, no_network, profile):
    import torch
    # what torch loaded (the runtimes take their graphs from it: test_inference_runtimes.py)
    qb = QualityBackend(mode="paper", profile=profile, store=face_store, inference=InferenceOptions(runtime="torch"))
    assert qb.metric_models["face_quality"] == FACE
    metric = qb.models.load(FACE)
    net = metric.net
    assert metric.metric_name == "topiq_nr-face"  # the reference's create_metric name
    assert (net.model_name, net.semantic_model_name, net.use_ref, net.test_img_size) == (
        "topiq_nr_gfiqa_res50", "resnet50", False, 512)
    state = net.state_dict()
    fake_gfiqa = torch.load(face_store / PYIQA_0_1_13["file"], weights_only=False)["params"]
    fake_cgfiqa = torch.load(face_store / CGFIQA_FILE, weights_only=False)["params"]
    assert set(fake_gfiqa) <= set(state) and set(fake_cgfiqa) == set(fake_gfiqa)
    assert all(torch.equal(state[k], v) for k, v in fake_gfiqa.items())
    # the store's CGFIQA file, which pyiqa 0.1.16 alone would load, is not what got loaded
    assert not any(torch.equal(state[k], v) for k, v in fake_cgfiqa.items()
                   if v.is_floating_point())
    assert not no_network

    # provenance of the face metric: the GFIQA file's checksum, as for the other models
    qb.metric_models = {"face_quality": FACE}  # the store holds the face model only
    prov = qb.provenance()
    sha = ws.sha256_file(face_store / PYIQA_0_1_13["file"])
    desc = prov["quality"]["face_quality"]
    assert desc.startswith(f"{FACE} pyiqa==") and f"{PYIQA_0_1_13['file']}:sha256:{sha}" in desc
    assert "cgfiqa" not in desc
    entry = prov["weights"][PYIQA_0_1_13["file"]]
    assert entry == {"model": FACE, "sha256": sha, "published_sha256_prefix": "d76bf1ae",
                     "matches_published": False, "stand_in_seed": 0}  # a stand-in
    assert CGFIQA_FILE not in prov["weights"]


def test_face_quality_aligns_the_face_as_pyiqa_0_1_13(face_store, no_network, monkeypatch):
    from facexlib.utils.face_restoration_helper import FaceRestoreHelper
    qb = QualityBackend(mode="paper", profile="reference", store=face_store)
    net = qb.models.load(FACE).net
    helper = net.face_helper
    assert isinstance(helper, FaceRestoreHelper)
    assert (helper.face_size, helper.crop_ratio, helper.upscale_factor, helper.use_parse) == (
        (512, 512), (1, 1), 1, True)

    calls, seen = [], []
    landmarks, warp = FaceRestoreHelper.get_face_landmarks_5, FaceRestoreHelper.align_warp_face
    monkeypatch.setattr(FaceRestoreHelper, "get_face_landmarks_5", lambda self, *a, **kw: (
        calls.append(("landmarks", kw)), landmarks(self, *a, **kw))[1])
    monkeypatch.setattr(FaceRestoreHelper, "align_warp_face", lambda self, *a, **kw: (
        calls.append(("align", self.cropped_faces)), warp(self, *a, **kw))[1])
    scored = net.forward_cross_attention
    monkeypatch.setattr(net, "forward_cross_attention",
                        lambda x, y=None: (seen.append(tuple(x.shape)), scored(x, y))[1])

    frames = [astronaut(), astronaut((300, 420))]  # full frames, one not square nor 512
    scores = qb.face_quality(frames)
    assert scores.shape == (2,) and np.isfinite(scores).all()
    assert [c[0] for c in calls] == ["landmarks", "align"] * 2  # one image at a time
    assert calls[0][1] == {"only_center_face": True, "eye_dist_threshold": 5}
    assert seen == [(1, 3, PYIQA_0_1_13["face_size"], PYIQA_0_1_13["face_size"])] * 2
    assert helper.cropped_faces[0].shape == (512, 512, 3)
    assert not no_network


def test_a_pyiqa_that_would_not_align_faces_is_refused(face_store, no_network):
    from theval_mesh.backends.quality.pyiqa_models import build
    qmodel = MODELS[FACE]
    unaligned = dataclasses.replace(
        qmodel, create_kwargs={**qmodel.create_kwargs, "align_crop_face": False})
    with pytest.raises(UserError, match="without its facexlib face alignment"):
        build(unaligned, face_store)
    assert not no_network


@pytest.mark.slow  # the face model on many images from several threads (about 12 s)
def test_concurrent_calls_of_the_face_model_give_what_each_gives_alone(face_store, no_network):
    """The quality service scores several videos at once on threads: the face model keeps the faces
    of the image in progress, so its calls must not interleave (they once failed with
    "'numpy.ndarray' object has no attribute 'append'" in facexlib, or could mix two images' faces)."""
    import threading
    qb = QualityBackend(mode="paper", profile="reference", store=face_store)
    rng = np.random.default_rng(5)
    batches = [[np.clip(astronaut((320 + 16 * i, 320)).astype(int) + rng.integers(-20, 20, (320 + 16 * i, 320, 3)),
                        0, 255).astype(np.uint8) for _ in range(3)] for i in range(4)]
    alone = [qb.face_quality(b) for b in batches]
    together, errors = [None] * len(batches), []

    def run(i):
        try:
            together[i] = qb.face_quality(batches[i])
        except Exception as err:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(err))
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)
    assert not no_network
