"""FaceXFormer (Narayan et al., github.com/Kartik-3004/facexformer) in our own torch code, for its
head-pose output (task 2) only.

Written from the original's `network/models/facexformer.py` and `network/models/transformer.py`
(cited below as fx.py:LINE and tr.py:LINE, at the mirror's HEAD d4a268b) so that:
  - `state_dict()` has exactly the original's key names and shapes: the published `model.pt`
    (`torch.load(...)['state_dict_backbone']`) loads with strict=True, as the reference's
    `load_model` does (THEval Naturalness/head_motion_dynamics.py:188, strict by default);
  - `forward(x)` returns the original's `headpose_output` (B, 3): pitch, yaw, roll in radians.
Nothing is downloaded: the Swin-B backbone is torchvision's `swin_b(weights=None)` (the original
builds it with weights='IMAGENET1K_V1', fx.py:194, then overwrites every value from model.pt).

What the head-pose path can skip, and what it cannot:
  - the backbone's final LayerNorm, permute, pooling and flatten (fx.py:244: `features` is
    computed and never used), the segmentation upscaling and hypernetwork MLPs, and the other
    six prediction heads: no value they compute reaches the pose head. Their parameters stay, so
    that the checkpoint loads strictly.
  - ALL 18 output tokens (7 task tokens + 11 mask tokens, fx.py:96) must stay: they attend to
    each other (self-attention, tr.py:186-192) and the image tokens attend to all of them
    (tr.py:206-211), so the pose token's output depends on every other token's embedding.
"""
import math
from itertools import pairwise

import torch
from torch import nn
from torch.nn import functional as F

# the order of the output tokens in the decoder (fx.py:96); the pose token is index 1
TOKENS = ("landmarks_token", "pose_token", "attribute_token", "visibility_token", "age_token",
          "gender_token", "race_token")
MASK_TOKENS = 11
# (name, output size) of the prediction heads, 3-layer MLPs 256-256-256-out (fx.py:69-89)
HEADS = (("landmarks", 136), ("pose", 3), ("attribute", 40), ("visibility", 29), ("age", 8),
         ("gender", 2), ("race", 5))
STAGES = (1, 3, 5, 7)  # swin `features` children whose outputs are hooked (fx.py:196, '0.1'...)
STAGE_CHANNELS = (128, 256, 512, 1024)  # fx.py:219
DIM = 256


class HeadMLP(nn.Module):
    """Linear layers with ReLU between them (fx.py:10-32; sigmoid_output is never set)."""

    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(sizes))

    def forward(self, x):
        *hidden, last = self.layers
        for layer in hidden:
            x = torch.relu(layer(x))
        return last(x)


class ChannelNorm(nn.Module):
    """LayerNorm over dim 1 of NCHW, eps 1e-6 (tr.py:32-44); only its parameters are used here
    (it sits in the segmentation upscaling)."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))


class Attention(nn.Module):
    """Multi-head attention whose projections may shrink the width (tr.py:216-271)."""

    def __init__(self, dim: int, heads: int, downsample: int = 1):
        super().__init__()
        inner = dim // downsample
        self.heads = heads
        self.q_proj = nn.Linear(dim, inner)
        self.k_proj = nn.Linear(dim, inner)
        self.v_proj = nn.Linear(dim, inner)
        self.out_proj = nn.Linear(inner, dim)

    def _split(self, x):
        b, n, c = x.shape
        return x.reshape(b, n, self.heads, c // self.heads).transpose(1, 2)

    def forward(self, q, k, v):
        q, k, v = self._split(self.q_proj(q)), self._split(self.k_proj(k)), self._split(self.v_proj(v))
        # scores scaled AFTER the product, then a plain softmax (tr.py:262-264)
        weights = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]), dim=-1)
        out = weights @ v
        b, h, n, c = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, n, h * c))


class FeedForward(nn.Module):
    """lin1 - ReLU - lin2 (tr.py:14-27: the decoder passes activation nn.ReLU, tr.py:54)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.lin1 = nn.Linear(dim, hidden)
        self.lin2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.lin2(torch.relu(self.lin1(x)))


class TwoWayBlock(nn.Module):
    """Tokens self-attend, tokens attend to the image, token MLP, image attends to tokens; each
    step residual then post-LayerNorm (tr.py:182-213)."""

    def __init__(self, dim: int, heads: int, hidden: int, first: bool):
        super().__init__()
        self.self_attn = Attention(dim, heads)
        self.norm1 = nn.LayerNorm(dim)
        self.cross_attn_token_to_image = Attention(dim, heads, 2)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = FeedForward(dim, hidden)
        self.norm3 = nn.LayerNorm(dim)
        self.norm4 = nn.LayerNorm(dim)
        self.cross_attn_image_to_token = Attention(dim, heads, 2)
        self.first = first

    def forward(self, tokens, image, token_pe, image_pe):
        if self.first:  # the first block REPLACES the tokens by their self-attention (tr.py:187)
            tokens = self.norm1(self.self_attn(tokens, tokens, tokens))
        else:
            q = tokens + token_pe
            tokens = self.norm1(tokens + self.self_attn(q, q, tokens))
        keys = image + image_pe
        tokens = self.norm2(tokens + self.cross_attn_token_to_image(tokens + token_pe, keys, image))
        tokens = self.norm3(tokens + self.mlp(tokens))
        # the image attends to the tokens: every token, not only the pose token, shapes `image`
        image = self.norm4(image + self.cross_attn_image_to_token(keys, tokens + token_pe, tokens))
        return tokens, image


class TwoWayTransformer(nn.Module):
    """Two blocks then a last token-to-image attention (tr.py:47-137; depth 2, width 256, 8 heads,
    MLP 2048: fx.py:211-216). The token embeddings themselves are the tokens' positional
    encoding (tr.py:118-127)."""

    def __init__(self, dim: int = DIM, heads: int = 8, hidden: int = 2048, depth: int = 2):
        super().__init__()
        self.layers = nn.ModuleList(TwoWayBlock(dim, heads, hidden, i == 0) for i in range(depth))
        self.final_attn_token_to_image = Attention(dim, heads, 2)
        self.norm_final_attn = nn.LayerNorm(dim)

    def forward(self, image, image_pe, token_embeddings):
        image = image.flatten(2).transpose(1, 2)  # B x HW x C (tr.py:114)
        image_pe = image_pe.flatten(2).transpose(1, 2)
        tokens = token_embeddings
        for layer in self.layers:
            tokens, image = layer(tokens, image, token_embeddings, image_pe)
        out = self.final_attn_token_to_image(tokens + token_embeddings, image + image_pe, image)
        return self.norm_final_attn(tokens + out)


class FaceDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = TwoWayTransformer()
        for name in TOKENS:
            setattr(self, name, nn.Embedding(1, DIM))
        self.mask_tokens = nn.Embedding(MASK_TOKENS, DIM)
        # segmentation path (fx.py:57-67): parameters only, for the strict load
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose2d(DIM, DIM // 4, 2, stride=2), ChannelNorm(DIM // 4), nn.GELU(),
            nn.ConvTranspose2d(DIM // 4, DIM // 8, 2, stride=2), nn.GELU())
        self.output_hypernetwork_mlps = HeadMLP((DIM, DIM, DIM, DIM // 8))
        for name, size in HEADS:
            setattr(self, f"{name}_prediction_head", HeadMLP((DIM, DIM, DIM, size)))

    def tokens(self) -> torch.Tensor:
        return torch.cat([getattr(self, n).weight for n in TOKENS] + [self.mask_tokens.weight])

    def forward(self, image, image_pe):
        """(B, 3) head pose from the fused image features (B, 256, h, w) and their encoding."""
        b = image.shape[0]
        tokens = self.tokens().unsqueeze(0).expand(b, -1, -1)
        out = self.transformer(image, image_pe.expand(b, -1, -1, -1), tokens)
        return self.pose_prediction_head(out[:, TOKENS.index("pose_token")])


class RandomFourierPE(nn.Module):
    """sin/cos of a fixed random projection of the grid's centre coordinates in [-1, 1]
    (fx.py:134-168); the projection is a buffer saved in the checkpoint."""

    def __init__(self, features: int = DIM // 2):
        super().__init__()
        self.register_buffer("positional_encoding_gaussian_matrix", torch.randn(2, features))

    def forward(self, h: int, w: int) -> torch.Tensor:
        m = self.positional_encoding_gaussian_matrix
        ys = (torch.arange(h, device=m.device, dtype=torch.float32) + 0.5) / h
        xs = (torch.arange(w, device=m.device, dtype=torch.float32) + 0.5) / w
        # x first, then y (fx.py:167)
        grid = torch.stack(torch.broadcast_tensors(xs[None, :], ys[:, None]), dim=-1)
        proj = 2 * math.pi * ((2 * grid - 1) @ m)
        return torch.cat([proj.sin(), proj.cos()], dim=-1).permute(2, 0, 1)  # C x H x W


class StageProjection(nn.Module):
    """Per-pixel linear map of a stage's channels to 256 (fx.py:180-188)."""

    def __init__(self, channels: int):
        super().__init__()
        self.proj = nn.Linear(channels, DIM)


class FaceXFormer(nn.Module):
    def __init__(self):
        super().__init__()
        from torchvision.models import swin_b

        swin = swin_b(weights=None)  # fx.py:194 downloads ImageNet weights that model.pt overwrites
        # features, norm, permute, avgpool, flatten: every child but the classifier (fx.py:195)
        self.backbone = nn.Sequential(*list(swin.children())[:-1])
        self.pe_layer = RandomFourierPE()
        self.face_decoder = FaceDecoder()
        self.linear_c = nn.ModuleList(StageProjection(c) for c in STAGE_CHANNELS)
        self.linear_fuse = nn.Conv2d(DIM * len(STAGES), DIM, kernel_size=1, bias=False)

    def stage_features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The outputs of swin stages 1-4 (B, H, W, C): what the original's forward hooks collect
        (fx.py:205-207, 235-238)."""
        out = []
        for i, block in enumerate(self.backbone[0]):
            x = block(x)
            if i in STAGES:
                out.append(x)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, 224, 224) ImageNet-normalised crops -> (B, 3) pitch, yaw, roll in radians:
        the original's `headpose_output` for task 2 (fx.py:274-275)."""
        stages = self.stage_features(x)
        size = stages[0].shape[1:3]
        fused = []
        for feat, lin in zip(stages, self.linear_c):
            b, h, w, c = feat.shape
            y = lin.proj(feat.reshape(b, h * w, c)).transpose(1, 2).reshape(b, DIM, h, w)
            fused.append(F.interpolate(y, size=size, mode="bilinear", align_corners=False))
        # concatenated coarsest first (fx.py:260: all_hidden_states[::-1])
        image = self.linear_fuse(torch.cat(fused[::-1], dim=1))
        image_pe = self.pe_layer(*image.shape[2:]).unsqueeze(0)
        return self.face_decoder(image, image_pe)


CHECKPOINT_KEY = "state_dict_backbone"  # model.pt holds {KEY: state_dict} (THEval hmd.py:187-188)


def load(checkpoint, device: str = "cpu") -> FaceXFormer:
    """The network in eval mode with a checkpoint's weights, strictly (a missing or extra key is an
    error, as in the reference's load_model). checkpoint: a model.pt path (read with
    weights_only=True: tensors only, no pickled code) or its state_dict."""
    if not isinstance(checkpoint, dict):
        checkpoint = torch.load(checkpoint, map_location=device, weights_only=True)[CHECKPOINT_KEY]
    # built without memory or random init (seconds for Swin-B), then the checkpoint's tensors are
    # assigned: every buffer is persistent (in the state_dict), so none is left on "meta"
    with torch.device("meta"):
        net = FaceXFormer()
    net.load_state_dict(checkpoint, strict=True, assign=True)
    return net.to(device).eval()
