"""Faithfulness tests of the missing-data score matching objectives (Givens, Liu & Reeve, ICML 2025).

Each test checks a property that only a correct implementation has, and each can fail (the
`*_differs` / `*_dropped` variants show that the comparison is sharp enough to catch the wrong one).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.studies.missing_sm import data as D
from icml25.studies.missing_sm import fit as F
from icml25.studies.missing_sm import sm

torch.set_num_threads(1)
DT = torch.float64


def _gauss(d=4, seed=0, strength=0.6):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(d, d, generator=g, dtype=DT) * strength
    P = A @ A.T + torch.eye(d, dtype=DT) * 0.8
    mu = torch.randn(d, generator=g, dtype=DT) * 0.5
    return mu, P


def _rows(mu, P, B, seed=1):
    g = torch.Generator().manual_seed(seed)
    L = torch.linalg.cholesky(torch.linalg.inv(P))
    return mu + torch.randn(B, P.shape[0], generator=g, dtype=DT) @ L.T


def _model(mu, P):
    return sm.Gaussian(mu.unsqueeze(0), P.unsqueeze(0))


def _autograd_hyvarinen(mu, P, x):
    """Hyvarinen loss with score and divergence from autograd of log q (no closed forms)."""
    x = x.clone().requires_grad_(True)
    lq = -0.5 * (((x - mu) @ P) * (x - mu)).sum()
    s = torch.autograd.grad(lq, x, create_graph=True)[0]
    div = sum(torch.autograd.grad(s[:, j].sum(), x, retain_graph=True)[0][:, j] for j in range(x.shape[1]))
    return (2 * div + (s**2).sum(1)).mean()


# ---------------------------------------------------------------------------------------------
# 1. nothing missing: every objective is the Hyvarinen loss
# ---------------------------------------------------------------------------------------------
def test_no_missing_all_losses_equal_hyvarinen():
    mu, P = _gauss(5)
    x = _rows(mu, P, 64).unsqueeze(0)
    m = torch.ones_like(x, dtype=torch.bool)
    model = _model(mu, P)
    ref = _autograd_hyvarinen(mu, P, x[0])
    h = sm.hyvarinen(model, x)[0]
    assert torch.allclose(h, ref, atol=1e-10)
    g = torch.Generator().manual_seed(0)
    for name, val in {
        "zeroed": sm.zeroed(model, x, m)[0],
        "marg_iw": sm.marg_iw(model, x, m, r=10, gen=g)[0],
        "em": sm.em(model, x, m, r=10, gen=g)[0],
        "marg_var (value)": sm.var_pseudo_loss(model, x.unsqueeze(2).expand(-1, -1, 7, -1), m)[1][0],
    }.items():
        assert torch.allclose(val, ref, atol=1e-9), name


def test_no_missing_var_pseudo_gradient_is_hyvarinen_gradient():
    mu, P = _gauss(4, seed=3)
    x = _rows(mu, P, 32).unsqueeze(0)
    m = torch.ones_like(x, dtype=torch.bool)

    def grads(fn):
        mu_ = mu.clone().requires_grad_(True)
        P_ = P.clone().requires_grad_(True)
        val = fn(sm.Gaussian(mu_.unsqueeze(0), sm.sym(P_).unsqueeze(0)))
        return torch.autograd.grad(val, [mu_, P_])

    ref = grads(lambda mod: sm.hyvarinen(mod, x)[0])
    got = grads(lambda mod: sm.var_pseudo_loss(mod, x.unsqueeze(2).expand(-1, -1, 5, -1), m)[0][0])
    for a, b in zip(ref, got):
        assert torch.allclose(a, b, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# 2. marginal scores against the analytic Gaussian marginal
# ---------------------------------------------------------------------------------------------
LAM = [0, 2, 3]  # observed; 1 and 4 missing


def _setup_marginal(B=6):
    mu, P = _gauss(5, seed=7)
    x = _rows(mu, P, B, seed=2)
    m = torch.zeros(5, dtype=torch.bool)
    m[LAM] = True
    return mu, P, x, m.expand(B, 5)


def test_iw_marginal_score_matches_analytic():
    mu, P, x, m = _setup_marginal()
    gen = torch.Generator().manual_seed(0)
    xk, log_p = sm.iw_draws(x.unsqueeze(0), m.unsqueeze(0), r=200_000, prop_std=4.0, gen=gen)
    s_hat, div_hat, _ = sm.iw_marginal_score(_model(mu, P), xk, log_p)
    ref = sm.analytic_marginal_score(mu, P, x, LAM)
    K = torch.linalg.inv(torch.linalg.inv(P)[LAM][:, LAM])
    assert (s_hat[0][:, LAM] - ref).abs().max() < 1e-2
    # divergence of the marginal score: d_j s_L,j = -K_jj
    assert (div_hat[0][:, LAM] + torch.diagonal(K)).abs().max() < 2e-2


def test_var_expectation_under_true_conditional_matches_analytic_and_zeroed_differs():
    mu, P, x, m = _setup_marginal()
    mean, C, miss = sm.conditional(mu, P, x, LAM)
    g = torch.Generator().manual_seed(1)
    r = 100_000
    Lc = torch.linalg.cholesky(C)
    draws = mean.unsqueeze(1) + torch.randn(x.shape[0], r, len(miss), generator=g, dtype=DT) @ Lc.T
    xk = x.unsqueeze(1).expand(-1, r, -1).clone()
    xk[:, :, miss] = draws
    model = _model(mu, P)
    Es = model.score(xk.unsqueeze(0))[0].mean(1)  # Lemma 4.8 (8): s_L = E'[s(x_L, X')_L]
    ref = sm.analytic_marginal_score(mu, P, x, LAM)
    assert (Es[:, LAM] - ref).abs().max() < 1e-2
    # the zeroed score -P_LL (x_L - mu_L) is not the marginal score when P is not diagonal ...
    zeroed = -(x[:, LAM] - mu[LAM]) @ P[LAM][:, LAM].T
    # with mu = 0 (the paper's App. D.2 example) the Zeroed objective scores exactly -P_LL x_L
    x0 = torch.where(m, x, torch.zeros_like(x))
    s0 = _model(torch.zeros_like(mu), P).score(x0.unsqueeze(0))[0][:, LAM]
    assert torch.allclose(s0, -x[:, LAM] @ P[LAM][:, LAM].T)
    assert (zeroed - ref).abs().max() > 0.1
    # ... and it is when P is diagonal (so the comparison above can fail)
    Pd = torch.diag(torch.diagonal(P))
    assert torch.allclose(-(x[:, LAM] - mu[LAM]) @ Pd[LAM][:, LAM].T, sm.analytic_marginal_score(mu, Pd, x, LAM))


# ---------------------------------------------------------------------------------------------
# 3. gradients: Var pseudo-loss and Marg-IW vs finite differences of the exact Gaussian L_M
# ---------------------------------------------------------------------------------------------
def _exact_LM(theta, d, x, lam):
    mu, L, logd = theta[:d], theta[d:d + d * d].reshape(d, d), theta[d + d * d:]
    P = sm.cholesky_precision(L, logd)
    K = torch.linalg.inv(torch.linalg.inv(P)[lam][:, lam])
    s = -(x[:, lam] - mu[lam]) @ K.T
    return (2 * (-torch.trace(K)) + (s**2).sum(1)).mean()


def _theta0(d, seed=11):
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randn(d, generator=g, dtype=DT) * 0.3,
                      torch.randn(d * d, generator=g, dtype=DT) * 0.3,
                      torch.randn(d, generator=g, dtype=DT) * 0.2])


def _unpack(theta, d):
    return theta[:d], sm.cholesky_precision(theta[d:d + d * d].reshape(d, d), theta[d + d * d:])


def _fd_grad(fn, theta, h=1e-5):
    g = torch.zeros_like(theta)
    for i in range(theta.numel()):
        e = torch.zeros_like(theta)
        e[i] = h
        g[i] = (fn(theta + e) - fn(theta - e)) / (2 * h)
    return g


@pytest.fixture(scope="module")
def grad_setup():
    d = 4
    lam = [0, 2]
    theta = _theta0(d)
    mu, P = _unpack(theta, d)
    # data rows from some other Gaussian (the objective's gradient is checked at any theta)
    mu_d, P_d = _gauss(d, seed=5)
    x = _rows(mu_d, P_d, 5, seed=4)
    m = torch.zeros(x.shape, dtype=torch.bool)
    m[:, lam] = True
    fd = _fd_grad(lambda t: _exact_LM(t, d, x, lam), theta)
    return d, lam, theta, x, m, fd


def _var_grad(theta, d, x, m, lam, r, seed, drop_cov=False):
    mu, P = _unpack(theta.detach(), d)
    mean, C, miss = sm.conditional(mu, P, x, lam)
    g = torch.Generator().manual_seed(seed)
    xk = x.unsqueeze(1).repeat(1, r, 1)
    xk[:, :, miss] = mean.unsqueeze(1) + torch.randn(x.shape[0], r, len(miss), generator=g, dtype=DT) @ torch.linalg.cholesky(C).T
    th = theta.clone().requires_grad_(True)
    mu_t, P_t = _unpack(th, d)
    model = sm.Gaussian(mu_t.unsqueeze(0), P_t.unsqueeze(0))
    if drop_cov:  # the forbidden shortcut: E' terms only, no Cov'(log q, .) terms
        s, dj = model.score(xk.unsqueeze(0)), model.diag_jac(xk.unsqueeze(0))
        Es = s.detach().mean(2)
        per = (-2 * Es * s.mean(2) + 2 * (s**2).mean(2) + 2 * dj.mean(2)) * m.unsqueeze(0)
        val = per.sum(-1).mean(-1)[0]
    else:
        val = sm.var_pseudo_loss(model, xk.unsqueeze(0), m.unsqueeze(0))[0][0]
    return torch.autograd.grad(val, th)[0]


def test_var_pseudo_loss_gradient_matches_finite_differences(grad_setup):
    d, lam, theta, x, m, fd = grad_setup
    reps = torch.stack([_var_grad(theta, d, x, m, lam, r=20_000, seed=s) for s in range(4)])
    est, se = reps.mean(0), reps.std(0) / 2 + 1e-3
    assert ((est - fd).abs() / se).max() < 5, (est - fd).abs().max()
    assert (est - fd).abs().max() < 0.05 * fd.abs().max()
    # dropping the covariance terms gives a different (wrong) gradient
    wrong = _var_grad(theta, d, x, m, lam, r=20_000, seed=0, drop_cov=True)
    assert (wrong - fd).abs().max() > 0.2 * fd.abs().max()


def test_marg_iw_gradient_flows_through_weights(grad_setup):
    d, lam, theta, x, m, fd = grad_setup
    th = theta.clone().requires_grad_(True)
    mu_t, P_t = _unpack(th, d)
    model = sm.Gaussian(mu_t.unsqueeze(0), P_t.unsqueeze(0))
    g = torch.Generator().manual_seed(0)
    draws = sm.iw_draws(x.unsqueeze(0), m.unsqueeze(0), r=100_000, prop_std=4.0, gen=g)
    g_iw = torch.autograd.grad(sm.marg_iw(model, x.unsqueeze(0), m.unsqueeze(0), draws=draws)[0], th)[0]
    assert (g_iw - fd).abs().max() < 0.05 * fd.abs().max()
    # the value is the exact L_M up to Monte-Carlo error
    with torch.no_grad():
        val = sm.marg_iw(model, x.unsqueeze(0), m.unsqueeze(0), draws=draws)[0]
    assert abs(float(val - _exact_LM(theta, d, x, lam))) < 0.05 * abs(float(_exact_LM(theta, d, x, lam))) + 0.05
    # EM's gradient (detached weights, full-data SM on imputed rows) is a different vector field
    mu_t, P_t = _unpack(th, d)
    model = sm.Gaussian(mu_t.unsqueeze(0), P_t.unsqueeze(0))
    g_em = torch.autograd.grad(sm.em(model, x.unsqueeze(0), m.unsqueeze(0), draws=draws)[0], th)[0]
    assert (g_em - fd).abs().max() > 0.2 * fd.abs().max()


# ---------------------------------------------------------------------------------------------
# 4. the variational net is trained towards the true conditional
# ---------------------------------------------------------------------------------------------
def test_variational_net_learns_conditional_mean():
    torch.manual_seed(0)
    d = 4
    mu, P = _gauss(d, seed=9)
    mu, P = mu.float(), P.float()
    x = _rows(mu.double(), P.double(), 512, seed=3).float()
    g = torch.Generator().manual_seed(0)
    m = torch.rand(x.shape, generator=g) > 0.5
    net = sm.VarNet(1, d, 64, gen=g)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    model = _model(mu, P)

    def cond_err():
        with torch.no_grad():
            x0 = torch.where(m, x, torch.zeros_like(x))
            pred = net.mean(x0.unsqueeze(0))[0]
            errs = []
            for i in range(64):
                lam = [j for j in range(d) if m[i, j]]
                if len(lam) in (0, d):
                    continue
                mean, _, miss = sm.conditional(mu, P, x[i:i + 1], lam)
                errs.append(((pred[i, miss] - mean[0]) ** 2).mean())
            return float(torch.stack(errs).mean())

    before = cond_err()
    for _ in range(600):
        idx = torch.randint(0, x.shape[0], (128,), generator=g)
        J = sm.var_phi_objective(net, model, x[idx].unsqueeze(0), m[idx].unsqueeze(0), "kl", 1, g)
        opt.zero_grad()
        J.sum().backward()
        opt.step()
    after = cond_err()
    assert after < 0.1 * before and after < 0.05, (before, after)
    # sigma approaches the conditional standard deviations (between min and max of sqrt(1/P_jj) ..
    # sqrt(C_jj) over subsets): here just a sanity band
    assert 0.2 < float(torch.exp(net.log_sigma)) < 2.0


# ---------------------------------------------------------------------------------------------
# 5. consistency: Marg-IW's error falls with n, Zeroed's does not
# ---------------------------------------------------------------------------------------------
def _consistency_problem(n, seed=0, d=4, p_miss=0.3):
    rng = np.random.default_rng([5, seed])
    A = rng.standard_normal((d, d)) * 0.5
    P = A @ A.T + 0.5 * np.eye(d)
    mu = np.full(d, 0.5)
    X = D.sample(mu, np.linalg.inv(P), 4000, rng)[:n]
    M = D.mask(rng.random((4000, d))[:n], p_miss)
    return torch.tensor(X).unsqueeze(0), torch.tensor(M).unsqueeze(0), P


def _fit_error(method, n, r, iters=300, batch=250, prop_std=2.0):
    """Adam (lr decayed 0.1 -> 0.002) on the Cholesky-parametrised Gaussian; returns ||P_hat - P||_F.
    Marg-IW is consistent as n and r grow together (Thm A.15 needs r of order n), so r grows with n."""
    X, M, P = _consistency_problem(n)
    Xo = torch.where(M, X, torch.zeros_like(X))
    d = X.shape[-1]
    mu = torch.zeros(1, d, dtype=DT, requires_grad=True)
    L = torch.zeros(1, d, d, dtype=DT, requires_grad=True)
    logd = torch.zeros(1, d, dtype=DT, requires_grad=True)
    opt = torch.optim.Adam([mu, L, logd], lr=0.1)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.02, iters)
    g = torch.Generator().manual_seed(0)
    for _ in range(iters):
        idx = torch.randint(0, n, (min(batch, n),), generator=g)
        model = sm.Gaussian(mu, sm.cholesky_precision(L, logd))
        x, m = Xo[:, idx], M[:, idx]
        loss = sm.marg_iw(model, x, m, r=r, prop_std=prop_std, gen=g) if method == "marg_iw" else sm.zeroed(model, x, m)
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        return float(torch.linalg.norm(sm.cholesky_precision(L, logd)[0] - torch.tensor(P)))


def test_consistency_iw_improves_with_n_zeroed_does_not():
    iw = [_fit_error("marg_iw", n, r) for n, r in ((250, 10), (4000, 80))]
    ze = [_fit_error("zeroed", n, 1) for n in (250, 4000)]
    assert iw[1] < 0.6 * iw[0], iw
    assert ze[1] > 0.8 * ze[0], ze
    assert ze[1] > 2 * iw[1], (iw, ze)


# ---------------------------------------------------------------------------------------------
# 6. data generators and the ROC
# ---------------------------------------------------------------------------------------------
def test_graph_generators():
    rng = np.random.default_rng(0)
    P = D.random_graph_precision(10, "star", rng)
    off = P - np.diag(np.diag(P))
    assert np.allclose(off[1:, 1:], 0) and (np.abs(off[0, 1:]) > 0).sum() >= 5
    nz = np.abs(off[off != 0])
    assert nz.min() >= 0.2 and nz.max() <= 0.35
    assert abs(np.linalg.eigvalsh(P).min() - 0.2) < 1e-9
    Pd = D.random_graph_precision(10, "dense", np.random.default_rng(1))
    frac = (np.abs(Pd[np.triu_indices(10, 1)]) > 0).mean()
    assert 0.25 < frac < 0.75
    mu, Pg, S = D.paper_gaussian(np.random.default_rng(2))
    assert np.allclose(S[9, :9], 2 * S[0, :9]) and np.isclose(S[9, 9], 4.25 * S[0, 0])
    assert np.allclose(mu, 0.5) and np.allclose(Pg @ S, np.eye(10), atol=1e-8)


def test_roc_auc_perfect_and_reversed():
    d = 5
    P = np.eye(d)
    P[0, 1:] = P[1:, 0] = 0.3
    # path that adds the true edges first, then the false ones: AUC 1
    iu = np.triu_indices(d, 1)
    order = sorted(range(len(iu[0])), key=lambda k: (iu[0][k] != 0))
    path = []
    for k in range(len(order) + 1):
        Q = np.eye(d)
        for kk in order[:k]:
            Q[iu[0][kk], iu[1][kk]] = Q[iu[1][kk], iu[0][kk]] = 0.1
        path.append(Q)
    assert F.roc_auc(np.stack(path), P, 0.002)[0] == pytest.approx(1.0)
    assert F.roc_auc(np.stack(path[::-1][:1] + [np.eye(d)]), P, 0.002)[0] == pytest.approx(0.5)
    rev = sorted(range(len(iu[0])), key=lambda k: (iu[0][k] == 0))
    path = []
    for k in range(len(rev) + 1):
        Q = np.eye(d)
        for kk in rev[:k]:
            Q[iu[0][kk], iu[1][kk]] = Q[iu[1][kk], iu[0][kk]] = 0.1
        path.append(Q)
    assert F.roc_auc(np.stack(path), P, 0.002)[0] == pytest.approx(0.0)
