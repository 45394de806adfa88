"""SimBa-lite (Lee et al. 2025, SimBa): running observation normalisation, input linear, residual
blocks x + W2 ReLU(W1 LN(x)), a final LayerNorm and a linear head. `expansion` is the block's inner
width multiple (SimBa uses 4; the mini scale uses 1 on CPU).

`record` (a list) collects the outputs of every encoder linear layer before any activation (input linear,
each block's fc1 before its ReLU and fc2), the layers whose outputs the official dormant ratio is taken
over (every Dense layer's output except the predictor head)."""
from __future__ import annotations

import numpy as np


class RunningNorm:
    """Running mean / variance of observations (parallel Welford update), as SimBa's obs normaliser."""

    def __init__(self, dim: int):
        self.mean = np.zeros(dim, dtype=np.float64)
        self.var = np.ones(dim, dtype=np.float64)
        self.count = 1e-4

    def update(self, x) -> None:
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.mean.shape[0])
        b_mean, b_var, b = x.mean(0), x.var(0), x.shape[0]
        delta, tot = b_mean - self.mean, self.count + b
        self.mean = self.mean + delta * b / tot
        self.var = (self.var * self.count + b_var * b + delta**2 * self.count * b / tot) / tot
        self.count = tot

    def __call__(self, x):
        return ((np.asarray(x, dtype=np.float64) - self.mean) / np.sqrt(self.var + 1e-8)).astype(np.float32)


def build_simba(in_dim: int, hidden: int, out_dim: int, num_blocks: int = 1, expansion: int = 1):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(hidden)
            self.fc1 = nn.Linear(hidden, hidden * expansion)
            self.fc2 = nn.Linear(hidden * expansion, hidden)
            for fc in (self.fc1, self.fc2):
                nn.init.kaiming_normal_(fc.weight, nonlinearity="relu")
                nn.init.zeros_(fc.bias)

        def forward(self, x, record=None):
            z = self.fc1(self.ln(x))
            out = self.fc2(torch.relu(z))
            if record is not None:
                record.extend((z, out))
            return x + out

    class SimBa(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(in_dim, hidden)
            nn.init.orthogonal_(self.inp.weight)
            nn.init.zeros_(self.inp.bias)
            self.blocks = nn.ModuleList(Block() for _ in range(num_blocks))
            self.ln = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, out_dim)
            nn.init.orthogonal_(self.head.weight)
            nn.init.zeros_(self.head.bias)

        def features(self, x, record=None):
            h = self.inp(x)
            if record is not None:
                record.append(h)
            for b in self.blocks:
                h = b(h, record)
            return self.ln(h)

        def forward(self, x, record=None):
            return self.head(self.features(x, record))

    return SimBa()
