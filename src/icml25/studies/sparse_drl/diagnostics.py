"""The paper's pathology diagnostics (Sec. 4): dormant ratio, Srank, parameter norm, gradient interference,
gradient norm.

Definitions follow the official code (SparseNetwork4DRL, scale_rl/networks/metrics.py and
scale_rl/agents/sac/sac_update.py): dormant score = E|a_i| / mean_j E|a_j| per layer over the outputs of
every encoder Dense layer (pre-activation; `get_dormant_ratio`), dormant if <= tau, pooled over layers;
Srank = smallest k whose top-k singular values hold >= (1 - delta) of their sum (`get_srank`, on the
encoder output); parameter norm = global L2 norm (`get_weight_norm` total); gradient interference = the
cosine matrix of per-sample actor-loss gradients (`compute_actor_gradient_cosine`), summarised here by its
mean off-diagonal entry (our summary: the official function returns the matrix); gradient norm = global L2
norm of the (masked) gradient of each update (`Trainer.apply_gradient`'s grad_norm, logged as
critic_gnorm), averaged over the updates since the previous diagnostic point.
"""
from __future__ import annotations

import numpy as np


def dormant_ratio(layers, tau: float = 0.1) -> float:
    """Share of neurons (over all given layers, each an N x units array of activations) that are dormant."""
    flags = []
    for a in layers:
        a = np.abs(np.asarray(a, dtype=np.float64)).reshape(-1, np.shape(a)[-1])
        score = a.mean(0)
        flags.append(score / (score.mean() + 1e-9) <= tau)
    flags = np.concatenate(flags)
    return float(flags.mean())


def srank(features, delta: float = 0.01) -> int:
    sv = np.linalg.svd(np.asarray(features, dtype=np.float64), compute_uv=False)
    total = sv.sum()
    if total <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(sv), (1 - delta) * total - 1e-12 * total) + 1)


def interference(grads) -> float:
    """Mean off-diagonal cosine similarity of per-sample gradient vectors (rows of `grads`)."""
    g = np.asarray(grads, dtype=np.float64)
    return interference_from_gram(g @ g.T)


def interference_from_gram(gram) -> float:
    """The same from the Gram matrix of the gradients (what a GPU run moves to the host: n x n, not n x params)."""
    gram = np.asarray(gram, dtype=np.float64)
    d = np.sqrt(np.maximum(np.diag(gram), 1e-24))
    c = gram / np.outer(d, d)
    n = c.shape[0]
    return float((c.sum() - np.trace(c)) / (n * (n - 1)))


def grad_norm(module) -> float:
    """Global L2 norm of the module's current .grad tensors (masked already when called after masked_step)."""
    import torch

    gs = [p.grad for p in module.parameters() if p.grad is not None]
    if not gs:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(gs))).item())


def param_norm(module) -> float:
    import torch

    with torch.no_grad():
        return float(torch.sqrt(sum((p.double() ** 2).sum() for p in module.parameters())).item())


def per_sample_grads(module, loss_fn, n: int):
    """Row i: flattened gradient of loss_fn(i) w.r.t. the module's parameters."""
    rows = []
    params = [p for p in module.parameters() if p.requires_grad]
    for i in range(n):
        module.zero_grad(set_to_none=True)
        loss_fn(i).backward()
        rows.append(np.concatenate([(p.grad if p.grad is not None else p.new_zeros(p.shape)).detach().reshape(-1).cpu().numpy()
                                    for p in params]))
    module.zero_grad(set_to_none=True)
    return np.stack(rows)


def per_sample_gram(module, loss_fn, n: int):
    """Gram matrix (n x n, float64 on the host) of the per-sample gradients, accumulated on the module's
    device one parameter tensor at a time (full-scale critics have ~10^8 parameters)."""
    import torch

    params = [p for p in module.parameters() if p.requires_grad]
    grads = []
    for i in range(n):
        module.zero_grad(set_to_none=True)
        loss_fn(i).backward()
        grads.append([(p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone() for p in params])
    module.zero_grad(set_to_none=True)
    gram = torch.zeros(n, n, dtype=torch.float64, device=params[0].device)
    for k in range(len(params)):
        rows = torch.stack([g[k].reshape(-1) for g in grads])
        gram += (rows @ rows.T).double()
    return gram.cpu().numpy()
