"""TokenSwift multi-token heads and their training with the backbone frozen.

h_0 = last hidden state (before the final norm); h_k = h_{k-1} + W_k RMSNorm_in(h_{k-1});
head 0 is the model's own norm + lm_head, head k >= 1 is lm_head(RMSNorm_post(h_k)) (the official
`MedusaModel`: residual linear, input and post norms, lm_head shared). At input token x_t head k
predicts x_{t+1+k}; the loss is the unweighted sum over heads k >= 1 of CE(head_k, x_{t+1+k}).
"""
from __future__ import annotations

import math

import torch
from torch import nn


class _RMS(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class _Head(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.linear = nn.Linear(d, d, bias=False)
        nn.init.zeros_(self.linear.weight)  # starts as the identity map of h (Medusa's init)
        self.input_layernorm = _RMS(d, eps)
        self.post_layernorm = _RMS(d, eps)

    def forward(self, h):
        h = h + self.linear(self.input_layernorm(h))
        return h, self.post_layernorm(h)


class MultiTokenHeads(nn.Module):
    def __init__(self, d: int, n_heads: int, eps: float = 1e-6):
        super().__init__()
        self.heads = nn.ModuleList([_Head(d, eps) for _ in range(n_heads)])

    def normed_states(self, h):
        """[post-norm h_1, ..., post-norm h_K] for pre-norm hidden states h [..., d]."""
        out = []
        for head in self.heads:
            h, hn = head(h)
            out.append(hn)
        return out

    def load_from_official(self, sd: dict):
        """Keys `{k}.linear.weight`, `{k}.input_layernorm.weight`, `{k}.post_layernorm.weight`."""
        self.load_state_dict({f"heads.{k}": v for k, v in sd.items()})


@torch.no_grad()
def all_logits(engine, heads: MultiTokenHeads, h):
    """[gamma, T, V] logits: head 0 (the model's own) then the K extra heads, for pre-norm h [T, d]."""
    out = [engine.logits(h)]
    for hn in heads.normed_states(h.to(engine.dtype)):
        out.append((hn @ engine.lm_head.T).float())
    return torch.stack(out)


def train_heads(engine, tokens, n_heads: int, steps: int, batch: int, seq_len: int, lr: float, warmup: int,
                weight_decay: float, seed: int, log_every: int = 10):
    """Train the heads on frozen-backbone hidden states of random windows of `tokens` (1-D LongTensor).
    AdamW, linear warmup then cosine decay (the official recipe: lr 5e-3, warmup 50, wd 0.1)."""
    g = torch.Generator().manual_seed(seed)
    heads = MultiTokenHeads(engine.config.hidden_size, n_heads, engine.eps)
    opt = torch.optim.AdamW(heads.parameters(), lr=lr, weight_decay=weight_decay)
    W = engine.lm_head.detach()
    curve = []
    for step in range(steps):
        frac = (step + 1) / max(1, warmup) if step < warmup else \
            0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
        for pg in opt.param_groups:
            pg["lr"] = lr * frac
        starts = torch.randint(0, len(tokens) - seq_len - n_heads - 2, (batch,), generator=g)
        loss = 0.0
        for s in starts.tolist():
            x = tokens[s: s + seq_len]
            h, _, _ = engine.forward(x, torch.arange(seq_len))
            states = heads.normed_states(h)
            for k, hn in enumerate(states, start=1):
                T = seq_len - 1 - k  # head k at t predicts x_{t+1+k}
                tgt = tokens[s + 1 + k: s + 1 + k + T]
                loss = loss + nn.functional.cross_entropy(hn[:T] @ W.T, tgt)
        loss = loss / batch
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % log_every == 0 or step == steps - 1:
            curve.append((step, float(loss)))
    return heads.eval(), curve
