"""The sharpness-aware steps (SAM, ASGA = SAGM-style gradient aligning with an adaptive radius) and the
sharpness measure.

ASGA (our reading, see the README): per step
  g   = grad L(theta)                                   (weights and bit logits)
  e   = (rho / ||g_w|| - alpha) g_w                      (the weights only; SAGM's `perturb_weights`)
  g_p = grad L(theta + e)
  d   = (g + g_p) / 2                                    (SAGM's `gradient_decompose`)
  h   = L(theta + e) - L(theta)                          (surrogate gap, from the two losses already computed)
  rho <- min(rho_max, ln(1 + max(h, 0)))                 (the paper's adaptive radius, for the next step)
SAM: e = rho g_w / ||g_w||, d = g_p. Both with rho = alpha = 0 reduce to the plain gradient d = g.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn


def _bn_momentum(model: nn.Module | None, value):
    """Freeze (value=0) or restore BatchNorm running statistics for the perturbed pass (as SAM/SAGM do)."""
    if model is None:
        return
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            if value == 0:
                m._mpq_momentum = m.momentum
                m.momentum = 0.0
            elif hasattr(m, "_mpq_momentum"):
                m.momentum = m._mpq_momentum


def grads(loss: torch.Tensor, params: list) -> list:
    gs = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, gs)]


def sharpness_aware_grads(loss_fn: Callable[[], torch.Tensor], weights: list, others: list, rho: float,
                          alpha: float, kind: str, model: nn.Module | None = None) -> dict:
    """The update direction of one SAM (kind='sam') or ASGA/SAGM (kind='asga') step, written into .grad of
    `weights` and `others` (e.g. the bit logits, which are not perturbed). Returns the two losses and h."""
    if kind not in ("sam", "asga"):
        raise ValueError(f"kind must be 'sam' or 'asga', got {kind!r}")
    params = list(weights) + list(others)
    loss = loss_fn()
    g = grads(loss, params)
    gw = g[: len(weights)]
    norm = torch.sqrt(sum((x * x).sum() for x in gw)).item()
    scale = (rho / (norm + 1e-12) if rho > 0 else 0.0) - (alpha if kind == "asga" else 0.0)
    eps = [scale * x for x in gw]
    with torch.no_grad():
        for p, e in zip(weights, eps):
            p.add_(e)
    _bn_momentum(model, 0)
    try:
        loss_p = loss_fn()
        gp = grads(loss_p, params)
    finally:
        _bn_momentum(model, 1)
        with torch.no_grad():
            for p, e in zip(weights, eps):
                p.sub_(e)
    for p, a, b in zip(params, g, gp):
        p.grad = (0.5 * (a + b)) if kind == "asga" else b.clone()
    h = float(loss_p.detach() - loss.detach())
    return {"loss": float(loss.detach()), "loss_p": float(loss_p.detach()), "gap": h, "grad_norm": norm}


def adaptive_rho(gap: float, rho_max: float) -> float:
    """rho = min(rho_max, ln(1 + h)); a negative gap (the ascent did not raise the loss) gives 0."""
    return float(min(rho_max, math.log1p(max(gap, 0.0))))


def sharpness(loss_fn: Callable[[], torch.Tensor], weights: list, rho: float) -> float:
    """sigma = L(theta + rho g/||g||) - L(theta): the first-order worst-case rise within radius rho (the
    SAM sharpness). The model must be in eval mode (fixed BN statistics) so both evaluations see one function."""
    loss = loss_fn()
    g = grads(loss, list(weights))
    norm = torch.sqrt(sum((x * x).sum() for x in g)).clamp_min(1e-12)
    eps = [rho * x / norm for x in g]
    with torch.no_grad():
        for p, e in zip(weights, eps):
            p.add_(e)
        try:
            loss_p = loss_fn()
        finally:
            for p, e in zip(weights, eps):
                p.sub_(e)
    return float(loss_p - loss.detach())
