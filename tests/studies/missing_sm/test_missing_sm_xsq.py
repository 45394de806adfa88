"""The non-Gaussian x_i^2 x_j^2 model of the d-sweep (xsq.py), its Gibbs sampler (data_xsq.py) and its wiring."""
import numpy as np
import pytest
import torch

from icml25.studies.missing_sm import data_xsq as DX
from icml25.studies.missing_sm import sm
from icml25.studies.missing_sm import xsq as XQ

torch.set_num_threads(1)


def _random_model(G=2, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(G, d, generator=g, dtype=torch.float64)
    p = 0.5 + torch.rand(G, d, generator=g, dtype=torch.float64)
    K = torch.rand(G, d, d, generator=g, dtype=torch.float64)
    K = (K + K.transpose(1, 2)) * (~torch.eye(d, dtype=torch.bool))
    return XQ.XSq(mu, p, K)


def test_score_and_divergence_equal_autograd():
    model = _random_model()
    x = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    lq = model.log_q(x)
    (g,) = torch.autograd.grad(lq.sum(), x, create_graph=True)
    assert torch.allclose(model.score(x), g, atol=1e-10)
    # diagonal of the Jacobian of the score = d_j s_j
    dj = torch.stack([torch.autograd.grad(g[..., j].sum(), x, retain_graph=True)[0][..., j] for j in range(4)], -1)
    assert torch.allclose(model.diag_jac(x), dj, atol=1e-10)
    # a wrong divergence (e.g. forgetting the K z term) would fail: it is not constant in x
    assert (dj.std(1) > 1e-3).all()


def test_sampler_moments_match_numerical_integration_d2():
    mu, p = np.array([0.5, -0.3]), np.array([1.0, 0.7])
    K = np.array([[0.0, 0.8], [0.8, 0.0]])
    t = np.linspace(-8, 8, 801)
    A, B = np.meshgrid(t, t, indexing="ij")
    logq = -0.5 * (p[0] * (A - mu[0]) ** 2 + p[1] * (B - mu[1]) ** 2) - 0.5 * K[0, 1] * A**2 * B**2
    w = np.exp(logq - logq.max())
    w /= w.sum()
    stats = {"x0": A, "x1": B, "x0^2": A**2, "x1^2": B**2, "x0^2x1^2": A**2 * B**2}
    X = DX.gibbs(mu, p, K, 40000, np.random.default_rng(1), burn=60)
    for name, f in stats.items():
        exact = (w * f).sum()
        vals = {"x0": X[:, 0], "x1": X[:, 1], "x0^2": X[:, 0] ** 2, "x1^2": X[:, 1] ** 2,
                "x0^2x1^2": X[:, 0] ** 2 * X[:, 1] ** 2}[name]
        se = vals.std() / np.sqrt(len(vals))
        assert abs(vals.mean() - exact) < 5 * se + 1e-3, (name, vals.mean(), exact, se)
    # the interaction matters: E[x0^2 x1^2] differs from the independent-Gaussian value
    indep = (1 / p[0] + mu[0] ** 2) * (1 / p[1] + mu[1] ** 2)
    assert abs((w * stats["x0^2x1^2"]).sum() - indep) > 0.05


def test_sampler_deterministic():
    a = DX.make(5, 50, np.random.SeedSequence([0, 1]), burn=5)
    b = DX.make(5, 50, np.random.SeedSequence([0, 1]), burn=5)
    for u, v in zip(a, b):
        assert np.array_equal(u, v)


def test_full_sm_on_gibbs_samples_recovers_truth():
    X, K, mu, p, _ = DX.make(4, 6000, np.random.SeedSequence([3, 4]), burn=100)
    assert (K > 0).sum() >= 2
    mu_h, p_h, K_h = XQ.sm_closed_form(X)
    assert np.abs(K_h - K).max() < 0.08
    assert np.abs(p_h - p).max() < 0.15 and np.abs(mu_h - mu).max() < 0.15


def test_objectives_take_the_model_and_reduce_to_hyvarinen_when_complete():
    model = _random_model(G=1, d=4, seed=2)
    x = torch.randn(1, 6, 4, dtype=torch.float64)
    m = torch.ones_like(x, dtype=torch.bool)
    h = sm.hyvarinen(model, x)
    assert torch.allclose(sm.zeroed(model, x, m), h)
    assert torch.allclose(sm.marg_iw(model, x, m, r=3), h)
    assert torch.allclose(sm.em(model, x, m, r=3), h)
    # with a missing coordinate the marginal score differs from the zero-filled joint score
    m2 = m.clone()
    m2[..., 0] = False
    assert not torch.allclose(sm.marg_iw(model, x, m2, r=50, gen=torch.Generator().manual_seed(0)),
                              sm.zeroed(model, x, m2))


def test_path_on_full_data_finds_the_star():
    X, K, _, _, U = DX.make(5, 800, np.random.SeedSequence([5, 5]), hub_prob=1.0, burn=60)
    hp = dict(r=4, proposal_var=16.0, batch=100, lr=0.05, var_hidden=8, var_lr=1e-3, var_steps=1, var_objective="kl",
              path=dict(iters_first=150, iters_per_gamma=3, n_gammas=25, log10_gamma_max=0.3, log10_gamma_min=-4))
    from icml25.studies.missing_sm import fit as F

    res = XQ.fit_path("full", X[None], (U >= 0.5)[None], hp, 0)
    assert np.abs(res["path"][0, 0]).max() == 0.0  # empty at gamma_max
    assert F.roc_auc(res["path"][0], K, 0.002)[0] > 0.9


@pytest.fixture(scope="module")
def xsq_data(tmp_path_factory):
    from pathlib import Path

    from icml25.core import config
    from icml25.studies.missing_sm import study as S

    root = Path(__file__).resolve().parents[3]
    cfg = config.effective(config.load_study(root, "missing_sm"), "smoke")
    cfg["data"].update(xsq_sweep=[4], xsq_p_miss=[0.4], xsq_n=120, xsq_burn=10, d_sweep=[], truncate=False,
                       graphs=["star"], p_miss=[0.3], gauss=False)
    base = tmp_path_factory.mktemp("xsq")
    raw, dd = base / "raw", base / "data"
    raw.mkdir()
    dd.mkdir()
    S.download(cfg, raw)
    S.preprocess(cfg, raw, dd)
    return cfg, dd, base


@pytest.mark.parametrize("method", ["marg_var", "marg_iw", "full"])
def test_xsq_setting_runs_through_train_evaluate(xsq_data, method):
    from icml25.studies.missing_sm import study as S

    cfg, dd, base = xsq_data
    z = np.load(dd / "seed0.npz")
    assert z["xsq4_X"].shape == (120, 4) and z["xsq4_M_p0.4"].dtype == bool
    run = base / method
    run.mkdir()
    out = S.train(cfg, method, 0, dd, None, run)
    rows = S.evaluate(cfg, method, 0, dd, None, run)
    got = {(r["setting"], r["metric"]): r["value"] for r in rows}
    assert 0.0 <= got[("xsq_d4_p0.4", "auc")] <= 1.0
    assert got[("xsq_d4_p0.4", "empty_at_gamma_max")] == 1.0
    for r in rows:
        assert r["metric"] in S.METRICS
    if method == "marg_var":
        assert {r["metric"]: r["value"] for r in out["metrics"]}["phi_steps"] > 0
