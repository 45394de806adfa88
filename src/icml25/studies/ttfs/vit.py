"""The ANNs that get converted: a small ViT (GELU MLP) and an EVA-like variant (SiLU-gated MLP, SwiGLU).

Attention is `nn.MultiheadAttention` (fused q/k/v in_proj, as timm's `attn.qkv`), so spikingjelly's STA
recipe converts the same module, and timm ViT checkpoints map onto it key for key (`load_timm_vit`).
"""
from __future__ import annotations

import torch
import torch.nn as nn


class Mlp(nn.Module):
    """fc1 -> GELU -> fc2 (ViT)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()  # exact (erf) GELU, as timm's ViT
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SwiGLU(nn.Module):
    """fc2(SiLU(gate(x)) * up(x)) (EVA-02's SwiGLU MLP)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden)
        self.up = nn.Linear(dim, hidden)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_dim: int, mlp: str, eps: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, mlp_dim) if mlp == "gelu" else SwiGLU(dim, mlp_dim)

    def forward(self, x):
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, need_weights=False)  # unpacked: the form spikingjelly's tracer accepts
        x = x + a
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Pre-norm ViT with a class token, learned position embeddings and a linear head."""

    def __init__(self, image: int, patch: int, channels: int, dim: int, depth: int, heads: int, mlp_dim: int,
                 classes: int, mlp: str = "gelu", eps: float = 1e-6):
        super().__init__()
        if image % patch:
            raise ValueError(f"image size {image} is not a multiple of patch size {patch}")
        self.image, self.patch, self.channels = image, patch, channels
        self.n_patches = (image // patch) ** 2
        self.patch_embed = nn.Linear(channels * patch * patch, dim)  # a stride-p conv, written as a Linear
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.n_patches + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, mlp_dim, mlp, eps) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.head = nn.Linear(dim, classes)

    def patchify(self, x):
        b, c, h, w = x.shape
        p = self.patch
        x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(b, (h // p) * (w // p), c * p * p)

    def forward(self, x):
        t = self.patch_embed(self.patchify(x))
        t = torch.cat([self.cls_token.expand(t.shape[0], -1, -1), t], dim=1) + self.pos_embed
        for blk in self.blocks:
            t = blk(t)
        # a slice, not t[:, 0]: spikingjelly's step-mode tracer refuses integer getitem
        return self.head(self.norm(t)[:, :1].flatten(1))


def build(spec: dict, image: int, channels: int, classes: int) -> ViT:
    if spec.get("arch", "vit") == "eva02":  # full scale: timm's EVA-02 classifiers (RoPE, SwiGLU, avg pool)
        from . import eva02

        return eva02.build(spec, image, channels, classes)
    return ViT(image, int(spec["patch"]), channels, int(spec["dim"]), int(spec["depth"]), int(spec["heads"]),
               int(spec["mlp_dim"]), classes, spec.get("mlp", "gelu"), float(spec.get("eps", 1e-6)))


def macs(model: ViT) -> int:
    """Multiply-accumulates of one ANN forward (per image): every matmul, the attention products included."""
    n, d = model.n_patches + 1, model.patch_embed.out_features
    total = model.n_patches * model.patch_embed.in_features * d
    for blk in model.blocks:
        total += n * d * 3 * d + 2 * n * n * d + n * d * d  # qkv, QK^T and AV, out_proj
        m = blk.mlp
        if isinstance(m, Mlp):
            total += n * d * m.fc1.out_features * 2
        else:
            total += n * d * m.gate.out_features * 3 + n * m.gate.out_features  # gate, up, fc2, the product
    return total + d * model.head.out_features


def train_ann(spec: dict, train: dict, x, y, seed: int, classes: int) -> tuple[ViT, list]:
    """AdamW with cosine decay on float pixels in [0, 1]; returns the model and its loss curve."""
    import math

    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = build(spec, x.shape[-1], x.shape[1], classes)
    epochs, bs = int(train["epochs"]), int(train["batch_size"])
    opt = torch.optim.AdamW(model.parameters(), lr=float(train["lr"]), weight_decay=float(train["weight_decay"]))
    steps = epochs * math.ceil(len(x) / bs)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=float(train["lr"]), total_steps=steps, pct_start=0.1)
    curve, step = [], 0
    model.train()
    for ep in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        total = 0.0
        for i in range(0, len(x), bs):
            idx = perm[i:i + bs]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx], label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
            step += 1
        curve.append((ep, total / len(x)))
    return model.eval(), curve
