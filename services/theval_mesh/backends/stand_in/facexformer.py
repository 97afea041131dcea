"""FaceXFormer's stand-in state (model.pt) and the Swin-B ImageNet init its constructor reads."""
from theval_mesh.backends.stand_in.rules import fan_in, normal, seeded_state

FACEXFORMER = "model.pt"  # the published file name (ckpts/model.pt), {CHECKPOINT_KEY: state}
SWIN_B = "swin_b-68c6b09e.pth"  # torchvision's swin_b IMAGENET1K_V1 file, in the torch hub cache
POSE_HEAD = "face_decoder.pose_prediction_head.layers.2"
PE_MATRIX = "pe_layer.positional_encoding_gaussian_matrix"
POSE_STD = 0.25  # radians of output per unit of (normalised) pose feature: see the docstring


def facexformer_state(seed: int) -> dict:
    """The stand-in FaceXFormer state_dict (module docstring)."""
    from theval_mesh.backends.headpose.facexformer_net import FaceXFormer

    net = FaceXFormer()
    state = seeded_state(net, seed)
    state[PE_MATRIX] = normal(seed, PE_MATRIX, state[PE_MATRIX].shape, 1.0)
    w = f"{POSE_HEAD}.weight"
    state[w] = normal(seed, w, state[w].shape, POSE_STD / fan_in(state[w].shape) ** 0.5)
    return state


def swin_b_state(seed: int, facexformer: dict) -> dict:
    """torchvision swin_b's state_dict with the values model.pt gives the backbone (the classifier
    `head`, which FaceXFormer drops, by the rules)."""
    from torchvision.models import swin_b

    net = swin_b(weights=None)
    state = seeded_state(net, seed)
    children = [name for name, _ in net.named_children()]
    for key in state:
        child, rest = key.split(".", 1)
        mine = f"backbone.{children.index(child)}.{rest}"
        if mine in facexformer:
            state[key] = facexformer[mine]
    return state
