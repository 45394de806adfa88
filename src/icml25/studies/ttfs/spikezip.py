"""Rate-coded baseline 2: SpikeZIP-TF (ICML'24) through spikingjelly's `SpikeZIPTFQANNRecipe`.

SpikeZIP-TF converts a quantised ANN (QANN), not the float ANN: every activation that becomes spikes goes
through a uniform quantiser with a learned step s and `level` levels, and the recipe turns each quantiser into
a signed ternary integrate-and-fire neuron (ST-BIF, one ±s spike per step at most) and each Linear / LayerNorm /
softmax into its temporal-difference form, so that the SNN's output summed over T steps equals the QANN's once
every neuron has released its count. The recipe does not quantise or train; this module builds the QANN of our
trained ViT in the module structure the recipe matches (its library contract):

* `model.patch_embed` (image -> tokens; a Linear named `lin`, not `proj`, which the recipe reads as a conv),
  `cls_token`, `pos_embed`, `blocks` (an `nn.Sequential`), `norm`, `head`: the recipe re-binds the forward and
  presents the class token and position embedding at step 0 only;
* per block: norm1 -> quan_norm1 -> attention (`qkv`, `quan_q/k/v`, softmax, `attn_quan`, AV,
  `after_attn_quan`, `proj`, `quan_proj`, as `_is_vit_qattention` requires) and norm2 -> quan_norm2 -> fc1 ->
  ReLU -> quan_act -> fc2 -> quan_fc2; the final norm is followed by one more quantiser.

The QANN starts from the trained ANN's weights with GELU replaced by ReLU (the recipe has a ReLU rule and no
GELU one: ReLU becomes the identity before an unsigned ST-BIF neuron), step sizes initialised from a
calibration pass, then a short quantisation-aware fine-tune (LSQ-style straight-through rounding, the same
number of steps for every seed). The EVA-like model's SiLU gate has no SpikeZIP module: n.a.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .rate_run import image_at_step0, run_counted


class Quantizer(nn.Module):
    """Uniform quantiser with the attributes the recipe reads (s, sym, pos_max, neg_min, level): round(x / s)
    clamped to [neg_min, pos_max], times s; straight-through gradient for the rounding, s learned (LSQ)."""

    def __init__(self, level: int, sym: bool):
        super().__init__()
        self.level, self.sym = int(level), bool(sym)
        self.s = nn.Parameter(torch.tensor(1.0))
        pos, neg = (self.level // 2 - 1, -(self.level // 2)) if self.sym else (self.level - 1, 0)
        self.register_buffer("pos_max", torch.tensor(float(pos)))
        self.register_buffer("neg_min", torch.tensor(float(neg)))
        self.observe = False     # calibration pass: pass x through, record a robust range
        self.seen: list = []

    def forward(self, x):
        if self.observe:
            v = x.detach().flatten().float()
            v = v if self.sym else v.clamp(min=0)
            self.seen.append(torch.quantile(v.abs()[torch.randperm(v.numel())[:100000]], 0.999))
            return x
        v = torch.clamp(x / self.s, float(self.neg_min), float(self.pos_max))
        return (torch.floor(v + 0.5) - v).detach() * self.s + v * self.s

    def init_from_seen(self):
        top = max(float(torch.stack(self.seen).mean()), 1e-4)
        with torch.no_grad():
            self.s.fill_(top / float(self.pos_max))
        self.seen, self.observe = [], False


def supported(ann) -> bool:
    """The recipe has modules for a GELU->ReLU MLP, not for the EVA-like SiLU-gated product."""
    from .vit import Mlp

    return all(isinstance(b.mlp, Mlp) for b in ann.blocks)


def _patchify(x, p):
    """(..., C, H, W) -> (..., N, C*p*p); leading dims (the time axis in multi-step mode) pass through."""
    *lead, c, h, w = x.shape
    x = x.reshape(*lead, c, h // p, p, w // p, p)
    n = len(lead)
    x = x.permute(*range(n), n + 1, n + 3, n, n + 2, n + 4)
    return x.reshape(*lead, (h // p) * (w // p), c * p * p)


class PatchEmbed(nn.Module):
    def __init__(self, lin: nn.Linear, patch: int):
        super().__init__()
        self.lin, self.patch = lin, patch

    def forward(self, x):
        return self.lin(_patchify(x, self.patch))


class QAttention(nn.Module):
    """Multi-head self-attention with the quantisers SpikeZIP-TF places (names from the recipe's matcher)."""

    def __init__(self, dim: int, heads: int, level: int):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.quan_q, self.quan_k, self.quan_v = (Quantizer(level, True) for _ in range(3))
        self.attn_quan = Quantizer(level, False)          # softmax output is in [0, 1]
        self.after_attn_quan, self.quan_proj = Quantizer(level, True), Quantizer(level, True)
        self.attn_drop, self.proj_drop = nn.Identity(), nn.Identity()
        self.is_softmax = True

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = self.quan_q(q), self.quan_k(k), self.quan_v(v)
        a = self.attn_quan(((q * self.scale) @ k.transpose(-1, -2)).softmax(-1))
        o = self.after_attn_quan(a @ v).transpose(1, 2).reshape(b, n, c)
        return self.quan_proj(self.proj(o))


class QMlp(nn.Module):
    def __init__(self, dim: int, hidden: int, level: int):
        super().__init__()
        self.fc1, self.act, self.quan_act = nn.Linear(dim, hidden), nn.ReLU(), Quantizer(level, False)
        self.fc2, self.quan_fc2 = nn.Linear(hidden, dim), Quantizer(level, True)

    def forward(self, x):
        return self.quan_fc2(self.fc2(self.quan_act(self.act(self.fc1(x)))))


class QBlock(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, level: int, eps: float):
        super().__init__()
        self.norm1, self.quan_norm1 = nn.LayerNorm(dim, eps=eps), Quantizer(level, True)
        self.attn = QAttention(dim, heads, level)
        self.norm2, self.quan_norm2 = nn.LayerNorm(dim, eps=eps), Quantizer(level, True)
        self.mlp = QMlp(dim, hidden, level)

    def forward(self, x):
        x = x + self.attn(self.quan_norm1(self.norm1(x)))
        return x + self.mlp(self.quan_norm2(self.norm2(x)))


class QViT(nn.Module):
    """The QANN: our ViT's computation with SpikeZIP-TF's quantisers (forward = the recipe's ViT forward)."""

    def __init__(self, ann, level: int):
        super().__init__()
        d = ann.patch_embed.out_features
        heads = ann.blocks[0].attn.num_heads
        hidden = ann.blocks[0].mlp.fc1.out_features
        eps = ann.norm.eps
        self.level = int(level)
        self.patch_embed = PatchEmbed(nn.Linear(ann.patch_embed.in_features, d), ann.patch)
        self.cls_token = nn.Parameter(ann.cls_token.detach().clone())
        self.pos_embed = nn.Parameter(ann.pos_embed.detach().clone())
        self.blocks = nn.Sequential(*(QBlock(d, heads, hidden, level, eps) for _ in ann.blocks))
        self.norm = nn.Sequential(nn.LayerNorm(d, eps=eps), Quantizer(level, True))
        self.head = nn.Linear(d, ann.head.out_features)
        with torch.no_grad():
            self.patch_embed.lin.load_state_dict(ann.patch_embed.state_dict())
            for qb, b in zip(self.blocks, ann.blocks):
                qb.norm1.load_state_dict(b.norm1.state_dict())
                qb.norm2.load_state_dict(b.norm2.state_dict())
                qb.attn.qkv.weight.copy_(b.attn.in_proj_weight)
                qb.attn.qkv.bias.copy_(b.attn.in_proj_bias)
                qb.attn.proj.load_state_dict(b.attn.out_proj.state_dict())
                qb.mlp.fc1.load_state_dict(b.mlp.fc1.state_dict())
                qb.mlp.fc2.load_state_dict(b.mlp.fc2.state_dict())
            self.norm[0].load_state_dict(ann.norm.state_dict())
            self.head.load_state_dict(ann.head.state_dict())

    def quantizers(self):
        return [m for m in self.modules() if isinstance(m, Quantizer)]

    def forward(self, x):
        t = self.patch_embed(x)
        t = torch.cat([self.cls_token.expand(t.shape[0], -1, -1), t], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(t))[:, 0])


def build_qann(ann, x, y, level: int, steps: int, lr: float, batch: int, calib: int, seed: int):
    """QANN from the trained ANN: step sizes from a calibration pass, then `steps` of quantisation-aware
    fine-tuning (AdamW, cosine decay, label smoothing 0.1 as the ANN's training)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    q = QViT(ann, level)
    for m in q.quantizers():
        m.observe = True
    with torch.no_grad():
        q.eval()(x[:calib])
    for m in q.quantizers():
        m.init_from_seen()
    q.train()
    opt = torch.optim.AdamW(q.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.5 * (1 + math.cos(math.pi * i / max(steps, 1))))
    curve = []
    for i in range(int(steps)):
        idx = torch.randint(0, len(x), (batch,), generator=g)
        loss = F.cross_entropy(q(x[idx]), y[idx], label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            for m in q.quantizers():
                m.s.clamp_(min=1e-5)
        curve.append(float(loss.detach()))
    return q.eval(), curve


def convert(qann, T: int):
    """The SNN: spikingjelly's recipe applied to the QANN (model_family='vit'), multi-step mode."""
    from spikingjelly.activation_based import functional
    from spikingjelly.activation_based.ann2snn import ModuleConverter, SpikeZIPTFQANNRecipe

    snn = ModuleConverter(recipe=SpikeZIPTFQANNRecipe(time_steps=int(T), model_family="vit"),
                          device="cpu").convert(qann).eval()
    functional.set_step_mode(snn, "m")
    return snn


def _fanout(name: str, qann: QViT) -> int:
    """Synapses driven by one spike of the ST-BIF neuron `name` (the layer it feeds). The spike-spike attention
    products count as synaptic: a q (k) spike adds one accumulated k (q) row entry per token, a v spike one
    entry per query, an attention-probability spike one head_dim row of v. Outputs that only join the residual
    stream count 1 (as rate.py counts STA)."""
    d = qann.patch_embed.lin.out_features
    n = qann.pos_embed.shape[1]
    a = qann.blocks[0].attn
    leaf = name.rsplit(".", 1)[-1]
    return {"quan_norm1": 3 * d, "q_if": n, "k_if": n, "v_if": n, "attn_if": a.head_dim, "after_attn_if": d,
            "proj_if": 1, "quan_norm2": qann.blocks[0].mlp.fc1.out_features, "quan_act": d, "quan_fc2": 1,
            }.get(leaf, qann.head.out_features if name == "norm.1" else 1)


@torch.no_grad()
def run(qann: QViT, test_x, T: int, batch: int = 250, step_mode: str = "m"):
    """(logits summed over T steps, stats) of the converted SNN; the image is presented at step 0 (the recipe
    releases the class token and position embedding at step 0 too). Spikes = |ST-BIF output| / s per step.
    step_mode "s" loops over the steps (the tests' replay); "m" (default) runs all T steps in one call."""
    from spikingjelly.activation_based import functional
    from spikingjelly.activation_based.neuron import STBIFNode

    snn = convert(qann, T)
    functional.set_step_mode(snn, step_mode)
    nodes = [(n, m) for n, m in snn.named_modules() if isinstance(m, STBIFNode)]
    if not nodes:
        raise RuntimeError("SpikeZIP conversion produced no ST-BIF neurons")
    counts = {"spikes": 0.0, "sops": 0.0, "neurons": 0.0}
    counted_once = {}

    def hook(name):
        fan = _fanout(name, qann)

        def fn(mod, inp, out):
            k = (out / mod.q_threshold.to(out.dtype)).abs().round()   # spikes per neuron per step (0 or 1)
            if step_mode == "s":
                k = k.unsqueeze(0)     # one step: the same (time, ...) layout
            if name == "norm.1":
                k = k[:, :, :1]        # only the class token's final-norm neurons reach the head
            counts["spikes"] += float(k.sum())
            counts["sops"] += float(k.sum()) * fan
            if step_mode == "m" or not counted_once[name]:
                counts["neurons"] += k[0].numel()
                counted_once[name] = True
        return fn

    def present(x):
        if step_mode == "s":
            return sum(snn(x if t == 0 else torch.zeros_like(x)) for t in range(int(T)))
        return image_at_step0(snn, x, T)

    def new_batch():  # neurons are counted once per batch
        counted_once.update(dict.fromkeys((n for n, _ in nodes), False))

    return run_counted(snn, [(m, hook(n)) for n, m in nodes], test_x, batch, present, counts, new_batch)
