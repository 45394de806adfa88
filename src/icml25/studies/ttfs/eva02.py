"""EVA-02 (Fang et al. 2023) as timm's `eva.Eva` defines its ImageNet classifiers, written for our conversion.

What differs from `vit.ViT` (our reading of timm's eva.py / pos_embed_sincos.py, not a copy):
* attention: fused q/k/v weights with a q bias and a v bias but no k bias; 2-D rotary position embedding
  (RoPE) applied to q and k of the patch tokens only (the class token is not rotated);
* RoPE ("cat" type, interleaved pairs): per head, head_dim/4 frequencies 10000^(-i/(head_dim/4)) for each
  of the two grid axes, positions arange(grid) rescaled to the pretraining grid (`ref_feat_shape`,
  t * ref / grid), angles [y-bands, x-bands] each repeated twice; x -> x*cos + rot(x)*sin with
  rot([x0, x1, ...]) = [-x1, x0, ...];
* MLP: SwiGLU fc2(norm(SiLU(gate(x)) * up(x))), the sub-LayerNorm `norm` present in EVA-02 B/L
  (timm's `scale_mlp`), absent in S/Ti (timm packs gate and up into one fc1 there: mapped in full.py);
* head: average of the patch tokens (class token excluded), then `fc_norm` (a LayerNorm), then the linear
  head; no final `norm` (timm's default for global_pool='avg').
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .vit import SwiGLU, ViT


def rope_tables(grid: int, ref_grid: int, head_dim: int, temperature: float = 10000.0):
    """(sin, cos), each (grid*grid, head_dim), row-major over the patch grid (row index first)."""
    if head_dim % 4:
        raise ValueError(f"RoPE needs head_dim divisible by 4, got {head_dim}")
    nb = head_dim // 4
    # float32 as timm computes it: the tables then agree with its forward to float rounding
    bands = 1.0 / (temperature ** (torch.arange(nb, dtype=torch.float32) / nb))
    t = torch.arange(grid, dtype=torch.float32) / grid * ref_grid   # rescaled to the pretraining grid
    rows, cols = torch.meshgrid(t, t, indexing="ij")
    ang = torch.cat([rows.reshape(-1, 1) * bands, cols.reshape(-1, 1) * bands], dim=1)  # (N, head_dim/2)
    ang = ang.repeat_interleave(2, dim=-1)                      # one angle per (even, odd) pair
    return ang.sin(), ang.cos()


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """[x0, x1, x2, x3, ...] -> [-x1, x0, -x3, x2, ...] (a rotation by 90 degrees of every pair)."""
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def apply_rope(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor, prefix: int = 1) -> torch.Tensor:
    """RoPE on the last axis of x (..., tokens, head_dim); the first `prefix` tokens (class) are left alone."""
    body = x[..., prefix:, :]
    body = body * cos.to(x.dtype) + rotate_pairs(body) * sin.to(x.dtype)
    return torch.cat([x[..., :prefix, :], body], dim=-2)


class RopeAttention(nn.Module):
    """Multi-head self-attention with fused q/k/v weights, q and v biases (no k bias) and RoPE on q, k."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.num_heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        nn.init.xavier_uniform_(self.in_proj_weight)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.out_proj = nn.Linear(dim, dim)

    def qkv_bias(self) -> torch.Tensor:
        return torch.cat([self.q_bias, torch.zeros_like(self.q_bias), self.v_bias])

    def forward(self, x, sin, cos):
        B, T, d = x.shape
        h = self.num_heads
        qkv = nn.functional.linear(x, self.in_proj_weight, self.qkv_bias())
        q, k, v = qkv.reshape(B, T, 3, h, d // h).permute(2, 0, 3, 1, 4)  # each (B, h, T, hd)
        q, k = apply_rope(q, sin, cos), apply_rope(k, sin, cos)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1)
        return self.out_proj((a @ v).transpose(1, 2).reshape(B, T, d))


class SubLNSwiGLU(SwiGLU):
    """SwiGLU with EVA-02 B/L's LayerNorm on the hidden product before fc2 (timm's `scale_mlp`)."""

    def __init__(self, dim: int, hidden: int, eps: float):
        super().__init__(dim, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        return self.fc2(self.norm(self.act(self.gate(x)) * self.up(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_dim: int, sub_ln: bool, eps: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = RopeAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = SubLNSwiGLU(dim, mlp_dim, eps) if sub_ln else SwiGLU(dim, mlp_dim)

    def forward(self, x, sin, cos):
        x = x + self.attn(self.norm1(x), sin, cos)
        return x + self.mlp(self.norm2(x))


class Eva02(nn.Module):
    """EVA-02 image classifier: patch embedding, class token + absolute position embedding (class token
    included), RoPE blocks, average pool of the patch tokens, fc_norm, head. Pixels in [0, 1] in; the
    checkpoint's input normalisation is folded into `patch_embed` (full.py)."""

    pool = "avg"

    def __init__(self, image: int, patch: int, channels: int, dim: int, depth: int, heads: int, mlp_dim: int,
                 classes: int, sub_ln: bool, ref_grid: int, eps: float = 1e-6, temperature: float = 10000.0):
        super().__init__()
        if image % patch:
            raise ValueError(f"image size {image} is not a multiple of patch size {patch}")
        self.image, self.patch, self.channels = image, patch, channels
        grid = image // patch
        self.n_patches = grid * grid
        self.patch_embed = nn.Linear(channels * patch * patch, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.n_patches + 1, dim) * 0.02)
        sin, cos = rope_tables(grid, ref_grid, dim // heads, temperature)
        self.register_buffer("rope_sin", sin, persistent=False)   # fixed, not in checkpoints
        self.register_buffer("rope_cos", cos, persistent=False)
        self.blocks = nn.ModuleList(Block(dim, heads, mlp_dim, sub_ln, eps) for _ in range(depth))
        self.fc_norm = nn.LayerNorm(dim, eps=eps)
        self.head = nn.Linear(dim, classes)

    patchify = ViT.patchify

    def forward(self, x):
        t = self.patch_embed(self.patchify(x))
        t = torch.cat([self.cls_token.expand(t.shape[0], -1, -1), t], dim=1) + self.pos_embed
        for blk in self.blocks:
            t = blk(t, self.rope_sin, self.rope_cos)
        return self.head(self.fc_norm(t[:, 1:].mean(1)))


def build(spec: dict, image: int, channels: int, classes: int) -> Eva02:
    return Eva02(image, int(spec["patch"]), channels, int(spec["dim"]), int(spec["depth"]), int(spec["heads"]),
                 int(spec["mlp_dim"]), classes, bool(spec.get("sub_ln", False)), int(spec["rope_ref_grid"]),
                 float(spec.get("eps", 1e-6)))
