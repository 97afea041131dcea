"""The VideoMAE v2 ViT-g/14 of content-debiased FVD (songweige/content-debiased-fvd, PyPI cd-fvd
0.1.1, `fvd.cdfvd(model='videomae')`): third_party/VideoMAEv2's `vit_giant_patch14_224` as its
utils.load_videomae_model builds it (224 px, 16 frames, tubelets of 2, mean pooling, 174 SSv2
classes), with the fine-tuned checkpoint `vit_g_hybrid_pt_1200e_ssv2_ft.pth`
(registry.CLASSIC_MODELS['fvd-videomae']) loaded strictly.

cd-fvd's features are `forward_features`: the tubelet embedding (a 2x14x14 Conv3d, 2,048 tokens of
1,408), plus the fixed sinusoid table, 40 pre-norm blocks (attention with q and v biases and none on
k, then an MLP of 6,144 with exact GELU), the mean over tokens and the final LayerNorm (`fc_norm`):
1,408 values a clip. Our module keeps its tensor names and its operations in its order (the scaled
query times the keys, softmax, times the values), so that fp32 features equal its own.
"""
import numpy as np

from theval_mesh.backends.classic import networks

NAME = "fvd-videomae"
FEATURES = 1408  # embed_dim of vit_giant_patch14_224
DEPTH, HEADS, PATCH, TUBELET, FRAMES, SIDE = 40, 16, 14, 2, 16, 224
MLP = int(FEATURES * (48 / 11))  # its Block's int(dim * mlp_ratio): 6144
CLASSES = 174  # the SSv2 head: in the file, not in the features
LN_EPS = 1e-6
CHECKPOINT_KEY = "model"  # VideoMAE v2's save_model puts the state dict there; cd-fvd reads model or module


def sinusoid_table(positions: int, dim: int) -> np.ndarray:
    """get_sinusoid_encoding_table: position / 10000^(2 (j // 2) / dim), sin on even j, cos on odd,
    computed in float64 and kept as float32."""
    j = np.arange(dim)
    angles = np.arange(positions)[:, None] / np.power(10000, 2 * (j // 2) / dim)[None, :]
    angles[:, 0::2] = np.sin(angles[:, 0::2])
    angles[:, 1::2] = np.cos(angles[:, 1::2])
    return angles.astype(np.float32)[None]


def _modules():
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(FEATURES, 3 * FEATURES, bias=False)
            self.q_bias = nn.Parameter(torch.zeros(FEATURES))
            self.v_bias = nn.Parameter(torch.zeros(FEATURES))
            self.proj = nn.Linear(FEATURES, FEATURES)
            self.scale = (FEATURES // HEADS) ** -0.5

        def forward(self, x):
            b, n, _ = x.shape
            bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias), self.v_bias))
            q, k, v = F.linear(x, self.qkv.weight, bias).reshape(b, n, 3, HEADS, -1).permute(2, 0, 3, 1, 4)
            attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(b, n, -1))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(FEATURES, MLP), nn.GELU(), nn.Linear(MLP, FEATURES)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn = nn.LayerNorm(FEATURES, eps=LN_EPS), Attention()
            self.norm2, self.mlp = nn.LayerNorm(FEATURES, eps=LN_EPS), Mlp()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv3d(3, FEATURES, (TUBELET, PATCH, PATCH), (TUBELET, PATCH, PATCH))

        def forward(self, x):
            return self.proj(x).flatten(2).transpose(1, 2)

    class VideoMAE(nn.Module):
        """vit_giant_patch14_224 in eval mode (its dropouts and drop paths are identities there)."""

        def __init__(self):
            super().__init__()
            self.patch_embed = PatchEmbed()
            self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))
            self.fc_norm = nn.LayerNorm(FEATURES, eps=LN_EPS)
            self.head = nn.Linear(FEATURES, CLASSES)
            tokens = (FRAMES // TUBELET) * (SIDE // PATCH) ** 2
            self.register_buffer("pos_embed", torch.from_numpy(sinusoid_table(tokens, FEATURES)), persistent=False)

        def forward_features(self, x):
            """(B, 3, 16, 224, 224) in [0, 1] -> (B, 1408)."""
            x = self.patch_embed(x)
            x = x + self.pos_embed.expand(x.shape[0], -1, -1)
            for block in self.blocks:
                x = block(x)
            return self.fc_norm(x.mean(1))

    return VideoMAE


def empty():
    """The network with no values (meta tensors): its names and shapes, for the stand-in."""
    import torch

    with torch.device("meta"):
        return _modules()()


def load(store=None):
    """The network with the store's checkpoint (its `model` or `module` entry, as cd-fvd reads it),
    strictly, in eval mode; the tensors are the loaded ones (no second copy of the 3.8 GB)."""
    state = networks.load(NAME, store)
    for key in (CHECKPOINT_KEY, "module"):
        if key in state:
            state = state[key]
            break
    net = empty()  # the sinusoid table is built on the CPU (from numpy) even there
    net.load_state_dict(state, strict=True, assign=True)
    return net.eval()


def stand_in_state(seed: int) -> dict:
    """The stand-in checkpoint's tensors by the stand-in rules, under vit_giant_patch14_224's names."""
    from theval_mesh.backends.stand_in.rules import seeded_state

    return seeded_state(empty(), seed, last_linear=("head",))


def features(net, clips) -> np.ndarray:
    """(B, 3, 16, 224, 224) float32 tensor in [0, 1] -> (B, 1408) float64 (cd-fvd's forward_features)."""
    import torch

    with torch.no_grad():
        return net.forward_features(clips).double().numpy()
