"""The SAND layer (Selection with Additive Noise Distortion), Pad et al., ICML 2025.

Trainable w in R^n, initialised to sqrt(k/n).  Every forward pass computes the gains

    a = clip(|w|, max=1);   a <- a / ||a||_2 * sqrt(k)      (so sum_i a_i^2 = k, a_i >= 0)

and writes a back into w (as the official TensorFlow code does with ``self.w.assign(wn)``
inside ``call``: the write-back happens in the forward pass, *before* the optimiser step,
and the gradient is the one of the normalised expression w.r.t. the pre-write w).
Consequently the stored parameter satisfies the constraint after every forward pass; after
an optimiser step it is re-normalised by the next forward.

Training output:  a*x + eps,  eps ~ N(0, (sigma*|1-a|)^2)  (equivalently a*x + (1-a)*z with
z ~ N(0, sigma^2), up to the sign of z), fresh noise per call; the noise is
reparameterised so gradients flow through its scale, as in the official code.
Evaluation output: a*x (no noise).

After training, ``select_topk`` keeps the k largest gains (mask buffer), zeroes the rest and
renormalises so that sum a^2 = k again; the same network is then evaluated (no retraining).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


class SANDLayer(nn.Module):
    def __init__(self, n: int, k: int, sigma: float = 1.5):
        super().__init__()
        if not 0 < k <= n:
            raise ValueError(f"need 0 < k <= n, got k={k}, n={n}")
        self.n, self.k, self.sigma = int(n), int(k), float(sigma)
        self.w = nn.Parameter(torch.full((n,), math.sqrt(k / n)))
        self.register_buffer("mask", torch.ones(n))

    def compute_gains(self) -> torch.Tensor:
        """Differentiable normalised gains a (does not modify w)."""
        # clone: w is overwritten in place after this, autograd must keep the pre-write values
        a = self.w.clone().abs().clamp(max=1.0) * self.mask
        return a / a.norm() * math.sqrt(self.k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.compute_gains()
        with torch.no_grad():
            self.w.copy_(a)
        out = x * a
        if self.training:
            out = out + torch.randn_like(x) * (self.sigma * (1.0 - a).abs())
        return out

    @torch.no_grad()
    def gains(self) -> torch.Tensor:
        """Current normalised gains (detached), without writing back."""
        return self.compute_gains().detach().clone()

    @torch.no_grad()
    def select_topk(self, k: int | None = None, scores: torch.Tensor | None = None) -> torch.Tensor:
        """Keep the top-k features (by gain, or by ``scores`` if given); returns sorted indices.

        The other gains are zeroed through the mask and w is renormalised so sum a^2 = k.
        """
        k = self.k if k is None else int(k)
        s = self.gains() if scores is None else scores.detach()
        # stable tie-break on index: sort by (-score, index)
        order = torch.from_numpy(np.lexsort((np.arange(self.n), -s.double().cpu().numpy())).copy())
        idx = torch.sort(order[:k]).values
        mask = torch.zeros(self.n)
        mask[idx] = 1.0
        self.mask.copy_(mask)
        self.w.copy_(self.compute_gains())
        return idx
