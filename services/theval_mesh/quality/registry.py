"""The paper's quality models and every weight file their pyiqa constructors read.

Names and URLs are copied from pyiqa 0.1.16 (archs/topiq_arch.py, archs/musiq_arch.py,
archs/topiq_swin.py) and facexlib 0.3.0 (detection/__init__.py, parsing/__init__.py); a unit test
checks them against the installed packages. A pyiqa file name ends in `-<hex>.pth`: by the torch.hub
convention that hex is a prefix of the file's sha256, which is what `verify` checks. The other files
have no published checksum.

`where` says how the loader finds a file:
  main       passed to pyiqa as `pretrained_model_path` (the checkpoint behind the scores)
  torch_hub  looked up by timm as `<torch hub dir>/checkpoints/<name>` (Swin ImageNet init,
             fully overwritten by the main checkpoint, but read while the model is built)
  facexlib   looked up by facexlib as `<pyiqa cache dir>/<name>` (face detector and parser that
             topiq_nr-face builds; the detector decides the aligned face that gets scored)
"""
from dataclasses import dataclass, field

from theval_mesh.common.errors import UserError

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
    create_kwargs: dict = field(default_factory=dict)

    @property
    def main(self) -> WeightFile:
        return next(f for f in self.files if f.where == "main")


def _pyiqa(name: str) -> WeightFile:
    return WeightFile(name, PYIQA_HF + name, name.rsplit("-", 1)[1].split(".")[0], "main")


MODELS = {m.name: m for m in (
    QualityModel("topiq_iaa", (
        _pyiqa("cfanet_iaa_ava_swin-393b41b4.pth"),
        WeightFile("swin_base_patch4_window12_384_22kto1k.pth", SWIN_URL, None, "torch_hub",
                   affects_scores=False),
    ), weight_key="params"),
    QualityModel("musiq", (_pyiqa("musiq_koniq_ckpt-e95806b9.pth"),), weight_key=None),
    QualityModel("musiq-spaq", (_pyiqa("musiq_spaq_ckpt-358bb6af.pth"),), weight_key=None),
    QualityModel("topiq_nr-face", (
        _pyiqa("topiq_nr_cgfiqa_res50-0a8b8e4f.pth"),
        WeightFile("detection_Resnet50_Final.pth",
                   FACEXLIB_RELEASES + "v0.1.0/detection_Resnet50_Final.pth", None, "facexlib"),
        WeightFile("parsing_parsenet.pth", FACEXLIB_RELEASES + "v0.2.2/parsing_parsenet.pth",
                   None, "facexlib", affects_scores=False),
    # The timm ResNet-50 ImageNet init would come from the Hugging Face hub; the CGFIQA checkpoint
    # holds every backbone weight (checked at load), so it is not fetched at all.
    ), weight_key="params", create_kwargs={"backbone_pretrain": False}),
)}

# Which model scores which metric, per profile (METRICS.md "Quality").
METRIC_MODELS = {
    "reference": {"global_aesthetic": "topiq_iaa", "mouth_quality": "musiq",
                  "face_quality": "topiq_nr-face"},
    "paper": {"global_aesthetic": "topiq_iaa", "mouth_quality": "musiq-spaq",
              "face_quality": "topiq_nr-face"},
}


def model(name: str) -> QualityModel:
    try:
        return MODELS[name]
    except KeyError:
        raise UserError(f"unknown quality model {name!r}; known: {', '.join(MODELS)}") from None
