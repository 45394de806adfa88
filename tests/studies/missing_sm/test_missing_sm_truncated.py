"""Faithfulness tests of the truncated variants (Sec. 3.2, eq. (5), Cor. 4.11, eq. (25)).

Each can fail: the analytic references are those of a truncated Gaussian, and the sharper checks
(`*_untruncated_differs`) show that ignoring the truncation is caught.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from icml25.studies.missing_sm import sm
from icml25.studies.missing_sm import trunc as T

torch.set_num_threads(1)
DT = torch.float64


def _gauss(d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(d, d, generator=g, dtype=DT) * 0.6
    P = A @ A.T + torch.eye(d, dtype=DT) * 0.8
    mu = torch.randn(d, generator=g, dtype=DT) * 0.5
    return mu, P


def _rows(mu, P, B, seed=1):
    g = torch.Generator().manual_seed(seed)
    L = torch.linalg.cholesky(torch.linalg.inv(P))
    return mu + torch.randn(B, P.shape[0], generator=g, dtype=DT) @ L.T


def _dom(d, lo=None, a=None, b=None):
    D = T.Domain.none(1, d, DT)
    if lo is not None:
        D.lo = torch.as_tensor(lo, dtype=DT)[None]
    if a is not None:
        D.a, D.b = torch.as_tensor(a, dtype=DT)[None], torch.tensor([float(b)], dtype=DT)
    return D


# ---------------------------------------------------------------------------------------------
# 1. g = 1 everywhere (no truncation, g_cap = 1): every truncated loss is its untruncated loss
# ---------------------------------------------------------------------------------------------
def test_no_truncation_reduces_to_untruncated_losses():
    d = 5
    mu, P = _gauss(d)
    x = _rows(mu, P, 40).unsqueeze(0)
    m = torch.rand(x.shape, generator=torch.Generator().manual_seed(2), dtype=DT) > 0.4
    model = sm.Gaussian(mu.unsqueeze(0), P.unsqueeze(0))
    D = T.Domain.none(1, d, DT)
    draws = sm.iw_draws(x, m, 7, 4.0, torch.Generator().manual_seed(3))
    pairs = {
        "full": (T.hyvarinen_t(model, x, D), sm.hyvarinen(model, x)),
        "zeroed": (T.zeroed_t(model, x, m, D), sm.zeroed(model, x, m)),
        "marg_iw": (T.marg_iw_t(model, x, m, D, draws=draws), sm.marg_iw(model, x, m, draws=draws)),
        "em": (T.em_t(model, x, m, D, draws=draws), sm.em(model, x, m, draws=draws)),
    }
    xk = draws[0]
    pt, vt = T.var_pseudo_loss_t(model, xk, m, D)
    pu, vu = sm.var_pseudo_loss(model, xk, m)
    pairs["marg_var (pseudo)"], pairs["marg_var (value)"] = (pt, pu), (vt, vu)
    for k, (a, b) in pairs.items():
        assert torch.allclose(a, b, atol=1e-10), k
    # and a cap of 2 doubles every loss (g is the constant cap where there is no boundary)
    assert torch.allclose(T.hyvarinen_t(model, x, D, cap=2.0), 2 * sm.hyvarinen(model, x))


# ---------------------------------------------------------------------------------------------
# 2. the truncated objective is minimised at the truth for a truncated Gaussian (closed form)
# ---------------------------------------------------------------------------------------------
def _truncated_rows(mu, P, n, dom, seed):
    x = _rows(mu, P, 6 * n, seed)
    keep = dom.inside(x.unsqueeze(0))[0]
    return x[keep][:n]


def _newton_fit(x, dom, cap, truncated=True):
    """The loss is quadratic in (P, h = P mu) (s = -P x + h), so one Newton step is its exact minimiser."""
    d = x.shape[1]
    iu = torch.triu_indices(d, d)

    def loss(z):
        A = torch.zeros(d, d, dtype=DT)
        A = A.index_put((iu[0], iu[1]), z[: iu.shape[1]])
        Pm = A + A.T - torch.diag(torch.diagonal(A))
        h = z[iu.shape[1]:]
        model = sm.Gaussian(torch.linalg.solve(Pm, h).unsqueeze(0), Pm.unsqueeze(0))
        xx = x.unsqueeze(0)
        return (T.hyvarinen_t(model, xx, dom, cap) if truncated else sm.hyvarinen(model, xx))[0]

    z0 = torch.cat([torch.eye(d, dtype=DT)[iu[0], iu[1]], torch.zeros(d, dtype=DT)])
    g = torch.autograd.functional.jacobian(loss, z0)
    H = torch.autograd.functional.hessian(loss, z0)
    z = z0 - torch.linalg.solve(H, g)
    A = torch.zeros(d, d, dtype=DT).index_put((iu[0], iu[1]), z[: iu.shape[1]])
    Pm = A + A.T - torch.diag(torch.diagonal(A))
    return torch.linalg.solve(Pm, z[iu.shape[1]:]), Pm


@pytest.mark.parametrize("kind", ["box", "halfspace"])
def test_truncated_sm_recovers_truncated_gaussian_untruncated_does_not(kind):
    d = 3
    mu, P = _gauss(d, seed=4)
    sd = torch.sqrt(torch.diagonal(torch.linalg.inv(P)))
    if kind == "box":  # the first two coordinates above their 30% quantile (as Sec. 5.1.1, harder)
        lo = torch.full((d,), -math.inf, dtype=DT)
        lo[:2] = mu[:2] + sd[:2] * stats.norm.ppf(0.3)
        dom = _dom(d, lo=lo)
    else:  # a halfspace holding 70% of the mass
        a = torch.tensor([0.6, -0.8, 0.0], dtype=DT)
        b = float(a @ mu + stats.norm.ppf(0.7) * torch.sqrt(a @ torch.linalg.inv(P) @ a))
        dom = _dom(d, a=a, b=b)
    x = _truncated_rows(mu, P, 160000, dom, seed=6)
    mu_t, P_t = _newton_fit(x, dom, cap=1.0)
    mu_u, P_u = _newton_fit(x, dom, cap=1.0, truncated=False)
    err_t = float(torch.linalg.norm(P_t - P) + torch.linalg.norm(mu_t - mu))
    err_u = float(torch.linalg.norm(P_u - P) + torch.linalg.norm(mu_u - mu))
    assert err_t < 0.1, err_t
    assert err_u > 10 * err_t, (err_u, err_t)


# ---------------------------------------------------------------------------------------------
# 3. marginal scores of a truncated Gaussian: IW (large r) and Var (true conditional) match the analytic
# ---------------------------------------------------------------------------------------------
def _analytic_marg_score_2d(mu, P, x1, kind, lo2=None, a=None, b=None):
    """X = (X1, X2) ~ N(mu, P^-1) truncated; X2 missing. d/dx1 log p(x1) of the truncated marginal."""
    S = np.linalg.inv(P)
    m21 = lambda t: mu[1] + S[1, 0] / S[0, 0] * (t - mu[0])
    s21 = math.sqrt(S[1, 1] - S[1, 0] ** 2 / S[0, 0])
    if kind == "box":  # x2 > lo2
        logf = lambda t: stats.norm.logpdf(t, mu[0], math.sqrt(S[0, 0])) + stats.norm.logsf((lo2 - m21(t)) / s21)
    else:  # a1 x1 + a2 x2 <= b, a2 > 0
        logf = lambda t: stats.norm.logpdf(t, mu[0], math.sqrt(S[0, 0])) + stats.norm.logcdf(
            ((b - a[0] * t) / a[1] - m21(t)) / s21)
    h = 1e-4
    sc = (logf(x1 + h) - logf(x1 - h)) / (2 * h)
    dv = (logf(x1 + h) - 2 * logf(x1) + logf(x1 - h)) / h**2
    return sc, dv


@pytest.mark.parametrize("kind", ["box", "halfspace"])
def test_truncated_iw_marginal_score_matches_analytic_untruncated_differs(kind):
    mu = np.array([0.3, -0.2])
    P = np.array([[1.3, 0.7], [0.7, 1.1]])
    if kind == "box":
        dom = _dom(2, lo=[-math.inf, 0.4])
        kw = {"lo2": 0.4}
    else:
        dom = _dom(2, a=[0.5, 1.0], b=0.3)
        kw = {"a": (0.5, 1.0), "b": 0.3}
    x1s = np.array([-0.8, 0.1, 0.7]) if kind == "box" else np.array([-1.2, -0.6, 0.0])
    x = torch.zeros(1, len(x1s), 2, dtype=DT)
    x[0, :, 0] = torch.tensor(x1s)
    m = torch.zeros_like(x, dtype=torch.bool)
    m[..., 0] = True
    model = sm.Gaussian(torch.tensor(mu)[None], torch.tensor(P)[None])
    xk, log_p = T.iw_draws_t(x, m, dom, 200000, 4.0, torch.Generator().manual_seed(0))
    assert bool(dom.inside(xk).all())  # the proposal is restricted to the domain
    s_hat, div_hat, _ = T.iw_marginal_score_t(model, xk, log_p, m, dom)
    s_unt, _, _ = sm.iw_marginal_score(model, *sm.iw_draws(x, m, 200000, 4.0, torch.Generator().manual_seed(0)))
    for i, t in enumerate(x1s):
        sc, dv = _analytic_marg_score_2d(mu, P, t, kind, **kw)
        assert abs(float(s_hat[0, i, 0]) - sc) < 1e-2, (t, float(s_hat[0, i, 0]), sc)
        assert abs(float(div_hat[0, i, 0]) - dv) < 3e-2, (t, float(div_hat[0, i, 0]), dv)
    worst = max(abs(float(s_unt[0, i, 0]) - _analytic_marg_score_2d(mu, P, t, kind, **kw)[0]) for i, t in enumerate(x1s))
    assert worst > 0.1  # ignoring the truncation gives the untruncated marginal score


@pytest.mark.parametrize("kind", ["box", "halfspace"])
def test_truncated_var_expectation_under_true_conditional_matches_analytic(kind):
    """E'[s~_j] over the true truncated conditional (drawn by rejection) is the marginal score, E'[d s~] +
    Var'(s~) its derivative (Lemma 4.8 after the change of variables)."""
    mu = np.array([0.3, -0.2])
    P = np.array([[1.3, 0.7], [0.7, 1.1]])
    dom, kw = (_dom(2, lo=[-math.inf, 0.4]), {"lo2": 0.4}) if kind == "box" else (
        _dom(2, a=[0.5, 1.0], b=0.3), {"a": (0.5, 1.0), "b": 0.3})
    t = 0.1 if kind == "box" else -0.6
    S = np.linalg.inv(P)
    rng = np.random.default_rng(0)
    x2 = rng.normal(mu[1] + S[1, 0] / S[0, 0] * (t - mu[0]), math.sqrt(S[1, 1] - S[1, 0] ** 2 / S[0, 0]), 400000)
    x2 = x2[x2 > 0.4] if kind == "box" else x2[0.5 * t + x2 <= 0.3]
    xk = torch.zeros(1, 1, len(x2), 2, dtype=DT)
    xk[..., 0], xk[0, 0, :, 1] = t, torch.tensor(x2)
    m = torch.tensor([[[True, False]]])
    model = sm.Gaussian(torch.tensor(mu)[None], torch.tensor(P)[None])
    _, value = T.var_pseudo_loss_t(model, xk, m, dom, cap=1e9)
    k0, c = T.tilt(dom, m)
    s = T._dir_score(model.score(xk), k0, c)[0, 0, :, 0]
    dj = T._dir_hess(model.P, k0, c)[0, 0, 0]
    sc, dv = _analytic_marg_score_2d(mu, P, t, kind, **kw)
    assert abs(float(s.mean()) - sc) < 1e-2
    assert abs(float(dj + s.var()) - dv) < 3e-2


# ---------------------------------------------------------------------------------------------
# 4. the truncated variational family: draws inside the domain with the right law, normaliser right
# ---------------------------------------------------------------------------------------------
def test_truncated_variational_sampler():
    G, B, d, r = 1, 2, 3, 40000
    x = torch.tensor([[[0.5, 0.0, 0.0], [0.2, 0.5, 0.0]]], dtype=DT)
    m = torch.tensor([[[True, False, False], [True, True, False]]])
    mu = torch.tensor([[[0.0, 0.3, -0.5], [0.0, 0.0, 0.7]]], dtype=DT)
    sigma = torch.tensor([0.8], dtype=DT)
    gen = torch.Generator().manual_seed(0)
    box = _dom(d, lo=[-math.inf, 0.0, 0.2])
    xk, logZ = T.truncated_sample(mu, sigma, x, m, box, r, gen)
    assert bool(box.inside(xk).all()) and torch.equal(xk[0, 1, :, :2], x[0, 1, :2].expand(r, 2))
    tn = stats.truncnorm((0.2 - 0.7) / 0.8, np.inf, loc=0.7, scale=0.8)
    assert abs(float(xk[0, 1, :, 2].mean()) - tn.mean()) < 0.02
    assert abs(float(logZ[0, 1]) - stats.norm.logsf((0.2 - 0.7) / 0.8)) < 1e-8
    half = _dom(d, a=[1.0, 1.0, 2.0], b=0.5)
    xk, logZ = T.truncated_sample(mu, sigma, x, m, half, r, gen)
    assert bool(half.inside(xk).all())
    # row 0: a_miss = (1, 2), bound 0.5 - 0.5 = 0: a_miss^T x' ~ N(a^T mu, 0.8^2 * 5) upper-truncated at 0
    lin = xk[0, 0, :, 1] + 2 * xk[0, 0, :, 2]
    ref = stats.truncnorm(-np.inf, (0.0 - (-0.7)) / (0.8 * math.sqrt(5)), loc=-0.7, scale=0.8 * math.sqrt(5))
    assert abs(float(lin.mean()) - ref.mean()) < 0.03
    assert abs(float(logZ[0, 0]) - stats.norm.logcdf(0.7 / (0.8 * math.sqrt(5)))) < 1e-8


def test_weight_function_vanishes_on_the_boundary():
    d = 3
    dom = _dom(d, lo=[0.0, -math.inf, 1.0])
    x = torch.tensor([[[0.3, 5.0, 1.1], [2.0, 0.0, 3.0], [0.0, 0.0, 1.0]]], dtype=DT)
    m = torch.ones_like(x, dtype=torch.bool)
    g, dg = T.weight_fn(dom, x, m, cap=1.0)
    assert torch.allclose(g[0, :, 0], torch.tensor([0.1, 1.0, 0.0], dtype=DT))
    assert torch.equal(dg[0, 0], torch.tensor([0.0, 0.0, 1.0], dtype=DT))
    m2 = m.clone()
    m2[0, 0, 2] = False  # the binding bound is missing: the marginal domain's nearest bound is x_0 > 0
    g2, _ = T.weight_fn(dom, x, m2)
    assert abs(float(g2[0, 0, 0]) - 0.3) < 1e-12 and float(g2[0, 0, 2]) == 0.0
    half = _dom(d, a=[3.0, 4.0, 0.0], b=1.0)
    g3, dg3 = T.weight_fn(half, torch.tensor([[[0.0, 0.0, 9.0]]], dtype=DT), torch.ones(1, 1, 3, dtype=torch.bool))
    assert abs(float(g3[0, 0, 0]) - 0.2) < 1e-12 and torch.allclose(dg3[0, 0], torch.tensor([-0.6, -0.8, 0.0], dtype=DT))
    m4 = torch.tensor([[[True, False, True]]])  # a missing coordinate with a_k != 0: no boundary
    g4, dg4 = T.weight_fn(half, torch.tensor([[[0.0, 0.0, 9.0]]], dtype=DT), m4)
    assert float(g4[0, 0, 0]) == 1.0 and float(dg4.abs().sum()) == 0.0
