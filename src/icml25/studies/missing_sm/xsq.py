"""Non-Gaussian exponential-family graphical model with x_i^2 x_j^2 interactions (the d-sweep model, ours:
the paper's Fig. 2 sweep is non-Gaussian; its exact parametrisation was not readable here).

  log q(x) = -1/2 sum_j p_j (x_j - mu_j)^2 - 1/4 sum_{i != j} K_ij x_i^2 x_j^2,   K symmetric, K_jj = 0, K >= 0
  s_j(x)   = -p_j (x_j - mu_j) - x_j (K z)_j,   z = x^2
  d_j s_j  = -p_j - (K z)_j                      (K_jj = 0, so (K z)_j does not depend on x_j)

The graph is the support of K. The conditional of x_j given the rest is Gaussian,
N(p_j mu_j / a_j, 1 / a_j), a_j = p_j + (K z)_j: exact Gibbs sampling (data_xsq.py).
The class has the duck type of sm.Gaussian (log_q, score, diag_jac, detach), so every objective of sm.py
(full, zeroed, marg_iw, em, marg_var) takes it unchanged.
"""
from __future__ import annotations

import numpy as np
import torch

from . import fit as F
from .sm import _bshape


class XSq:
    def __init__(self, mu: torch.Tensor, p: torch.Tensor, K: torch.Tensor):
        self.mu, self.p, self.K = mu, p, K  # (G,d), (G,d), (G,d,d)

    def _kz(self, x):
        z = (x**2).reshape(x.shape[0], -1, x.shape[-1])
        return torch.bmm(z, self.K.transpose(1, 2)).reshape(x.shape)

    def log_q(self, x):
        diff = x - _bshape(self.mu, x.dim())
        return -0.5 * (_bshape(self.p, x.dim()) * diff**2).sum(-1) - 0.25 * (self._kz(x) * x**2).sum(-1)

    def score(self, x):
        return -_bshape(self.p, x.dim()) * (x - _bshape(self.mu, x.dim())) - x * self._kz(x)

    def diag_jac(self, x):
        return -_bshape(self.p, x.dim()).expand_as(x) - self._kz(x)

    def detach(self) -> "XSq":
        return XSq(self.mu.detach(), self.p.detach(), self.K.detach())


def fit_path(method: str, X, M, hp: dict, seed: int, progress=None) -> dict:
    """L1 regularisation path on the interaction matrix K (proximal SGD as fit.fit's GGM path: iters_first at
    gamma_max, then iters_per_gamma per gamma), K projected on K >= 0 (integrability; ours), p_j >= min_diag, per-problem gradient norm
    clipped at hp.xsq_clip (ours).
    Start: mu = 0, p = 1, K = 0. X, M: (G, n, d). Returns the K snapshots (G, S, d, d)."""
    gen = torch.Generator().manual_seed(int(seed))
    X, M, Xobs = F._prepare(X, M)
    G, n, d = X.shape
    obj = F.Objective(method, G, d, hp, gen)
    gs, schedule, snaps = F.gamma_schedule(hp["path"])
    mu = torch.zeros(G, d, requires_grad=True)
    p = torch.ones(G, d, requires_grad=True)
    A = torch.zeros(G, d, d, requires_grad=True)
    off = (~torch.eye(d, dtype=torch.bool)).to(torch.float32)
    lr, batch, out = float(hp["lr"]), int(hp["batch"]), []
    clip = float(hp.get("xsq_clip", 10.0))
    for t, gamma in enumerate(schedule):
        model = XSq(mu, p, 0.5 * (A + A.transpose(1, 2)) * off)
        if obj.method in F.VAR_METHODS:
            obj.train_phi(model, Xobs, M, batch)
        idx = torch.randint(0, n, (batch,), generator=gen)
        loss = obj.loss(model, Xobs, M, X, idx).sum()
        gmu, gp, gA = torch.autograd.grad(loss, [mu, p, A])
        with torch.no_grad():
            # per-problem gradient-norm clipping (ours): the x^4-scale terms make a rare heavy IW/variational
            # draw blow up an SGD step once K is non-zero
            nrm = torch.sqrt((gmu**2).sum(-1) + (gp**2).sum(-1) + (gA**2).sum((1, 2)))
            sc = torch.clamp(clip / (nrm + 1e-12), max=1.0)
            gmu, gp, gA = gmu * sc[:, None], gp * sc[:, None], gA * sc[:, None, None]
            mu -= lr * gmu
            p -= lr * gp
            p.clamp_(min=float(hp["path"].get("min_diag", 1e-3)))
            A -= lr * 0.5 * (gA + gA.transpose(1, 2))
            A.copy_(torch.clamp(A - lr * gamma, min=0.0) * off)  # prox of gamma*|K| on K >= 0
        if t in snaps:
            out.append(A.detach().clone())
        if progress is not None:
            progress.update(1)
    return {"path": torch.stack(out, 1).numpy(), "gammas": gs, "mu": mu.detach().numpy(), "p": p.detach().numpy(),
            "phi_steps": obj.phi_steps}


def sm_closed_form(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Full-data Hyvarinen SM for this family, in closed form (the loss is quadratic in theta =
    (p, p*mu, K_offdiag)): returns (mu, p, K). Used to check that SM on Gibbs samples recovers the truth."""
    Xt = torch.as_tensor(X, dtype=torch.float64)
    n, d = Xt.shape
    iu = torch.triu_indices(d, d, 1)
    npar = 2 * d + iu.shape[1]

    def loss(theta):
        p, c, k = theta[:d], theta[d:2 * d], theta[2 * d:]
        K = torch.zeros(d, d, dtype=theta.dtype)
        K = K.index_put((iu[0], iu[1]), k).index_put((iu[1], iu[0]), k)
        z = Xt**2
        kz = z @ K
        s = -p * Xt + c - Xt * kz
        return (2 * (-p - kz) + s**2).sum(-1).mean()

    th0 = torch.zeros(npar, dtype=torch.float64)
    H = torch.autograd.functional.hessian(loss, th0)
    g = torch.autograd.functional.jacobian(loss, th0)
    th = torch.linalg.solve(H, -g)
    p, c, k = th[:d], th[d:2 * d], th[2 * d:]
    K = torch.zeros(d, d, dtype=torch.float64)
    K[iu[0], iu[1]] = k
    K[iu[1], iu[0]] = k
    return (c / p).numpy(), p.numpy(), K.numpy()
