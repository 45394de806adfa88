"""Faithfulness tests of `marg_var_diag`, our ablation of Marg-Var (not the paper's method): the variational
family N(mu_phi(x^0), diag(sigma)^2) with one sigma per coordinate instead of App. E.2's single sigma.

Each can fail: (1) with every coordinate's sigma equal it is the scalar family, draw for draw, in its loss and
in its gradients (a wrong log-density or a sampler that treats sigma per coordinate differently breaks it);
(2) the truncated sampler with unequal sigmas stays inside a halfspace and has the right law (a normal taken in
x-space instead of z-space leaves the domain); (3) on the paper's Gaussian (X10 = 2 X1 + Z/2), the KL-fitted
sigma_j is the conditional standard deviation 1/sqrt(P_jj) of each coordinate, small for X1 and X10 and ~1 for
the rest, while the scalar family's single sigma is pulled to sqrt(d / tr P), below every loose coordinate's.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from icml25.studies.missing_sm import data as D
from icml25.studies.missing_sm import fit as F
from icml25.studies.missing_sm import sm
from icml25.studies.missing_sm import trunc as T

torch.set_num_threads(1)
DT = torch.float64


def _pair(G=2, d=4, hidden=8, log_sigma=-0.4):
    """A scalar-sigma net and a per-coordinate one with the same weights and every sigma equal."""
    a = sm.VarNet(G, d, hidden, gen=torch.Generator().manual_seed(3))
    b = sm.VarNet(G, d, hidden, gen=torch.Generator().manual_seed(3), diag=True)
    with torch.no_grad():
        a.log_sigma.fill_(log_sigma)
        b.log_sigma.fill_(log_sigma)
    assert a.log_sigma.shape == (G,) and b.log_sigma.shape == (G, d)
    return a, b


def _problem(G=2, B=16, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(G, B, d, generator=g)
    m = torch.rand(G, B, d, generator=g) > 0.5
    A = torch.randn(G, d, d, generator=g) * 0.4
    P = A @ A.transpose(1, 2) + torch.eye(d)
    return x, m, sm.Gaussian(torch.randn(G, d, generator=g) * 0.3, P)


def _grads(net, J):
    gs = torch.autograd.grad(J.sum(), [net.log_sigma, *net.W, *net.b])
    return gs[0], gs[1:]


@pytest.mark.parametrize("objective", ["kl", "fisher"])
def test_equal_sigmas_are_the_scalar_family(objective):
    a, b = _pair()
    x, m, model = _problem()
    xa, _, _ = a.sample(x, m, 5, torch.Generator().manual_seed(1))
    xb, _, _ = b.sample(x, m, 5, torch.Generator().manual_seed(1))
    assert torch.allclose(xa, xb)
    Ja = sm.var_phi_objective(a, model, x, m, objective, 3, torch.Generator().manual_seed(2))
    Jb = sm.var_phi_objective(b, model, x, m, objective, 3, torch.Generator().manual_seed(2))
    assert torch.allclose(Ja, Jb, rtol=1e-5, atol=1e-6)
    ga, wa = _grads(a, Ja)
    gb, wb = _grads(b, Jb)
    # the scalar sigma's gradient is the sum of the per-coordinate ones; the mean net's are the same
    assert torch.allclose(ga, gb.sum(-1), rtol=1e-4, atol=1e-5)
    assert all(torch.allclose(u, v, rtol=1e-4, atol=1e-6) for u, v in zip(wa, wb))
    # and the per-coordinate gradient is not that of one shared parameter: it differs across coordinates
    assert float((gb - gb.mean(-1, keepdim=True)).abs().max()) > 1e-3


@pytest.mark.parametrize("kind", ["box", "half"])
def test_equal_sigmas_are_the_scalar_family_truncated(kind):
    G, d = 2, 4
    a, b = _pair(G, d)
    x, m, model = _problem(G, 16, d, seed=4)
    dom = T.Domain.none(G, d)
    if kind == "box":
        dom.lo = torch.tensor([[-0.5, -math.inf, 0.0, -math.inf]] * G)
    else:
        dom.a, dom.b = torch.tensor([[1.0, -0.5, 2.0, 0.3]] * G), torch.full((G,), 1.5)
    # observed values inside the domain (bounded coordinates >= their bound; |a^T x_L| < 0.6 < b)
    x = x.clamp(min=0.0) if kind == "box" else 0.1 * x
    if kind == "half":
        assert float((torch.where(m, x, torch.zeros_like(x)) * dom.a[:, None]).sum(-1).max()) < 1.0
    for o in ("kl", "fisher"):
        Ja = T.var_phi_objective_t(a, model, x, m, dom, o, 3, torch.Generator().manual_seed(2))
        Jb = T.var_phi_objective_t(b, model, x, m, dom, o, 3, torch.Generator().manual_seed(2))
        assert torch.allclose(Ja, Jb, rtol=1e-4, atol=1e-5), o
        assert torch.allclose(_grads(a, Ja)[0], _grads(b, Jb)[0].sum(-1), rtol=1e-3, atol=1e-4), o


def test_truncated_sampler_with_unequal_sigmas():
    d, r = 3, 60000
    x = torch.tensor([[[0.5, 0.0, 0.0]]], dtype=DT)
    m = torch.tensor([[[True, False, False]]])
    mu = torch.tensor([[[0.0, 0.3, -0.5]]], dtype=DT)
    sigma = torch.tensor([[1.0, 0.3, 1.5]], dtype=DT)
    half = T.Domain(torch.full((1, d), -math.inf, dtype=DT), torch.tensor([[1.0, 1.0, 2.0]], dtype=DT),
                    torch.tensor([0.5], dtype=DT))
    xk, logZ = T.truncated_sample(mu, sigma, x, m, half, r, torch.Generator().manual_seed(0))
    assert bool(half.inside(xk).all())
    # a_miss^T x' = x1 + 2 x2 ~ N(-0.7, 0.3^2 + 4 * 1.5^2), upper-truncated at 0.5 - 0.5 = 0
    s = math.sqrt(0.3**2 + 4 * 1.5**2)
    lin = xk[0, 0, :, 1] + 2 * xk[0, 0, :, 2]
    ref = stats.truncnorm(-np.inf, 0.7 / s, loc=-0.7, scale=s)
    assert abs(float(lin.mean()) - ref.mean()) < 0.03
    assert abs(float(logZ[0, 0]) - stats.norm.logcdf(0.7 / s)) < 1e-8
    # each coordinate's mean against rejection sampling from N(mu, diag(sigma)^2) on the halfspace
    g = np.random.default_rng(0)
    z = g.standard_normal((400000, 2)) * [0.3, 1.5] + [0.3, -0.5]
    z = z[z[:, 0] + 2 * z[:, 1] <= 0.0]
    assert np.allclose(xk[0, 0, :, 1:].mean(0).numpy(), z.mean(0), atol=0.02)
    assert np.allclose(xk[0, 0, :, 1:].std(0).numpy(), z.std(0), atol=0.02)


def _fit_sigma(diag: bool, seed=0, p_miss=0.5, steps=700):
    """Train the variational net (KL, theta fixed at the truth) on the paper's d=10 Gaussian; sigma."""
    mu, P, S = D.paper_gaussian(D._rng(0, seed, 2))
    rng = np.random.default_rng(1)
    X = torch.tensor(D.sample(mu, S, 2000, rng), dtype=torch.float32)[None]
    M = torch.tensor(D.mask(rng.random(X.shape[1:]), p_miss))[None]
    Xo = torch.where(M, X, torch.zeros_like(X))
    model = sm.Gaussian(torch.tensor(mu, dtype=torch.float32)[None], torch.tensor(P, dtype=torch.float32)[None])
    g = torch.Generator().manual_seed(0)
    net = sm.VarNet(1, 10, 32, gen=g, diag=diag)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(steps):
        idx = torch.randint(0, X.shape[1], (256,), generator=g)
        J = sm.var_phi_objective(net, model, Xo[:, idx], M[:, idx], "kl", 1, g)
        opt.zero_grad()
        J.sum().backward()
        opt.step()
    return torch.exp(net.log_sigma.detach())[0].numpy(), P


def test_per_coordinate_sigma_fits_the_conditional_precision():
    sig, P = _fit_sigma(diag=True)
    target = 1 / np.sqrt(np.diag(P))  # KL(N(m, diag s^2) || N(., P_mm^-1)) is minimised at s_j^2 = 1/P_jj
    assert np.allclose(sig, target, rtol=0.15), (sig, target)
    loose = np.median(sig[1:9])
    assert sig[0] < 0.4 * loose and sig[9] < 0.7 * loose, sig  # X1 (~0.26) and X10 (~0.55) tight, others ~1
    s1, _ = _fit_sigma(diag=False)
    # the scalar family: s^2 = E|miss| / E sum_miss P_jj = d / tr P under MCAR, pulled down by X1 and X10
    assert abs(float(s1) - math.sqrt(10 / np.trace(P))) < 0.08 * math.sqrt(10 / np.trace(P)), (s1, P)
    assert float(s1) < 0.8 * loose


def test_marg_var_diag_runs_the_same_algorithm():
    """fit.fit with marg_var_diag trains a per-coordinate net, takes the same phi-steps as marg_var, and differs
    from it only through sigma (same seed: same data order and draws)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1, 80, 4))
    M = rng.random(X.shape) > 0.3
    hp = {"r": 3, "proposal_var": 16.0, "batch": 20, "lr": 0.05, "var_hidden": 8, "var_lr": 1e-3, "var_steps": 2,
          "var_objective": "kl", "path": {"iters_first": 4, "iters_per_gamma": 1, "n_gammas": 3,
                                          "log10_gamma_max": 0.0, "log10_gamma_min": -2.0}}
    obj = F.Objective("marg_var_diag", 1, 4, hp, torch.Generator().manual_seed(0))
    assert obj.net.diag and obj.net.log_sigma.shape == (1, 4)
    a = F.fit("marg_var", {"g": {"X": X, "M": M, "kind": "path"}}, hp, 0)
    b = F.fit("marg_var_diag", {"g": {"X": X, "M": M, "kind": "path"}}, hp, 0)
    assert a["phi_steps"] == b["phi_steps"] > 0
    assert not np.array_equal(a["g"]["path"], b["g"]["path"])
