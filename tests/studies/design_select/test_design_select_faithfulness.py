"""Faithfulness tests for design_select: properties only a correct implementation has."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from icml25.studies.design_select import data_designers as D
from icml25.studies.design_select import data_landscape as L
from icml25.studies.design_select import inference as I

ALPHA = 0.1


# ---- the prediction-powered p-value ---------------------------------------------------------------

def _weighted_case(seed=0, n=300, N=2000):
    rng = np.random.default_rng(seed)
    y = rng.normal(0.4, 0.2, n)
    yhat = y + rng.normal(0.05, 0.1, n)
    yhat_u = rng.normal(0.5, 0.15, N)
    w = rng.gamma(2.0, 1.0, n)
    return y, yhat, yhat_u, w


def test_pvalue_equals_manual_formula_and_ppi_python():
    from ppi_py import ppi_mean_pval

    y, yhat, yhat_u, w = _weighted_case()
    n, N = len(y), len(yhat_u)
    for tau in (0.3, 0.42, 0.5, 0.6):
        ws = w / w.sum() * n  # self-normalised
        theta = yhat_u.mean() + np.mean(ws * (y - yhat))
        sigma = math.sqrt(np.var(yhat_u) / N + np.var(ws * (y - yhat)) / n)
        manual = 1 - norm.cdf((theta - tau) / sigma)
        ours = float(I.pp_pvalue(y, yhat, w, yhat_u, tau))
        lib = float(np.squeeze(ppi_mean_pval(y, yhat, yhat_u, null=tau, alternative="larger", lam=1, w=w)))
        assert abs(ours - manual) < 1e-10 and abs(ours - lib) < 1e-10, (tau, ours, manual, lib)
    # self-normalisation: rescaling the ratios changes nothing; changing their shape does
    assert abs(I.pp_pvalue(y, yhat, 7.3 * w, yhat_u, 0.45) - I.pp_pvalue(y, yhat, w, yhat_u, 0.45)) < 1e-12
    assert abs(I.pp_pvalue(y, yhat, w ** 2, yhat_u, 0.45) - I.pp_pvalue(y, yhat, w, yhat_u, 0.45)) > 1e-4


def test_labelled_only_is_ppi_with_lambda_zero():
    from ppi_py import ppi_mean_pval

    y, yhat, yhat_u, w = _weighted_case(1)
    est, se = I.labelled_only_estimate(y, w)
    for tau in (0.35, 0.4, 0.45):
        lib = float(np.squeeze(ppi_mean_pval(y, yhat, yhat_u, null=tau, alternative="larger", lam=0, w=w)))
        assert abs(float(I.pvalues(est, se, [tau])[0]) - lib) < 1e-10


def test_bonferroni_selection_threshold_and_empty_set():
    p = np.array([[[0.1 / 4], [0.1 / 4 + 1e-9], [0.5], [0.02]]])  # (T=1, K=4, n_tau=1)
    sel = I.bonferroni_select(p, 0.1, axis=1)
    assert sel[0, :, 0].tolist() == [True, False, False, True]
    assert not I.bonferroni_select(np.full((1, 4, 1), 0.9), 0.1, axis=1).any()  # empty set is valid


def test_selection_metrics_by_hand():
    theta = np.array([0.2, 0.5, 0.8])
    taus = np.array([0.4, 0.6])
    sel = np.zeros((3, 3, 2), bool)
    sel[0, 0, :] = True          # trial 0 selects theta=0.2: error at both taus
    sel[1, 2, :] = True          # trial 1 selects theta=0.8: no error
    sel[2, 1, 1] = True          # trial 2 selects theta=0.5 only at tau=0.6: error there
    m = I.selection_metrics(sel, theta, taus)
    assert np.allclose(m["error_rate"], [1 / 3, 2 / 3])
    assert np.allclose(m["selection_rate"], [2 / 3, 1.0])
    assert np.allclose(m["worst_theta"], [(0.2 + 0.8) / 2, (0.2 + 0.8 + 0.5) / 3])


# ---- coverage on a Gaussian toy with a known ratio --------------------------------------------------

def _toy(rng, reps, n, N, mu_q, bias_slope=0.4):
    """Labelled X ~ N(0,1), designs X~ ~ N(mu_q, 1); Y = X + 0.5 X^2 + eps; biased predictor
    f(x) = x + 0.5 x^2 + bias_slope * x + 0.1 (too optimistic where designs go)."""
    X = rng.standard_normal((reps, n))
    Y = X + 0.5 * X ** 2 + 0.3 * rng.standard_normal((reps, n))
    Xd = mu_q + rng.standard_normal((reps, N))
    f = lambda x: x + 0.5 * x ** 2 + bias_slope * x + 0.1
    w = np.exp(mu_q * X - mu_q ** 2 / 2)  # N(mu_q,1)/N(0,1)
    theta = mu_q + 0.5 * (1 + mu_q ** 2)
    return Y, f(X), w, f(Xd), theta


def test_pp_lower_bound_covers_and_prediction_only_does_not():
    rng = np.random.default_rng(0)
    Y, fX, w, fXd, theta = _toy(rng, 2000, 400, 1000, mu_q=0.5)
    est, se = I.pp_estimate(Y, fX, w, fXd)
    cover = np.mean(est - norm.ppf(1 - ALPHA) * se <= theta)
    assert cover >= 1 - ALPHA - 0.02, cover
    est0, se0 = I.prediction_only_estimate(fXd)
    assert np.mean(est0 - norm.ppf(1 - ALPHA) * se0 <= theta) < 0.5
    # without the ratios the rectifier corrects the bias under p, not under q: under-covers
    est1, se1 = I.pp_estimate(Y, fX, np.ones_like(w), fXd)
    assert np.mean(est1 - norm.ppf(1 - ALPHA) * se1 <= theta) < 1 - ALPHA - 0.05


def test_negative_control_unit_weights_exceed_alpha_while_pp_controls():
    rng = np.random.default_rng(1)
    T, mus = 300, [0.0, 0.4, 0.8, 1.2]
    est_pp, se_pp, est_1, se_1, thetas = [], [], [], [], []
    for mu in mus:
        Y, fX, w, fXd, th = _toy(rng, T, 400, 1000, mu_q=mu)
        e, s = I.pp_estimate(Y, fX, w, fXd); est_pp.append(e); se_pp.append(s)
        e, s = I.pp_estimate(Y, fX, np.ones_like(w), fXd); est_1.append(e); se_1.append(s)
        thetas.append(th)
    thetas = np.array(thetas)
    taus = np.linspace(thetas.min(), thetas.max() + 0.3, 12)
    bound = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / T)
    err = lambda est, se: I.selection_metrics(
        I.bonferroni_select(I.pvalues(np.stack(est, 1), np.stack(se, 1), taus), ALPHA, axis=1), thetas, taus)
    m_pp, m_1 = err(est_pp, se_pp), err(est_1, se_1)
    assert m_pp["error_rate"].max() <= bound, m_pp["error_rate"]
    assert m_1["error_rate"].max() > ALPHA, m_1["error_rate"]
    assert m_pp["selection_rate"].max() > 0.5  # PP is not vacuous


# ---- density ratios, landscape, design distributions -------------------------------------------------

def test_known_ratio_has_mean_one_under_labelled_distribution():
    rng = np.random.default_rng(2)
    seed = L.SEEDS[3][:12]
    P = L.mutant_probs(seed, 0.9)
    beta = rng.normal(0, 0.05, (12, 4))
    Q = D.maxent_closed_form(beta, 0.1)
    X = L.sample_product(P, 40000, rng)
    w = L.density_ratio(X, Q, P)
    se = w.std() / math.sqrt(len(w))
    assert abs(w.mean() - 1) <= 3 * se, (w.mean(), se)
    # and E_q[1/w] = 1 the other way round: the ratio is q/p, not p/q
    Xq = L.sample_product(Q, 40000, rng)
    v = 1 / L.density_ratio(Xq, Q, P)
    assert abs(v.mean() - 1) <= 3 * v.std() / math.sqrt(len(v))


def test_mutant_distribution_matches_official_get_mutant():
    rng = np.random.default_rng(3)
    seed, p = "UAAACGAUGC", 0.3
    # the official get_mutant: each site redrawn uniformly from the alphabet with prob p
    X = np.array([[c if rng.random() >= p else rng.choice(list(L.ALPHABET)) for c in seed] for _ in range(20000)])
    idx = L.to_idx(["".join(r) for r in X])
    P = L.mutant_probs(seed, p)
    freq = np.stack([(idx == a).mean(0) for a in range(4)], 1)
    assert np.abs(freq - P).max() < 0.015
    assert np.allclose(P.sum(1), 1)
    samp = L.sample_product(P, 20000, rng)
    freq2 = np.stack([(samp == a).mean(0) for a in range(4)], 1)
    assert np.abs(freq2 - P).max() < 0.015


def test_reinforce_matches_closed_form_for_a_linear_predictor():
    rng = np.random.default_rng(4)
    Ls, a, lam = 8, 4, 0.05
    beta = rng.normal(0, 0.05, (Ls, a))
    f = lambda X1h: X1h @ beta.reshape(-1) + 0.2
    Q_cf = D.maxent_closed_form(beta, lam)
    Q_rf = D.reinforce_maxent(f, Ls, a, lam, rng, n_iter=300, n_sample=300, lr=0.05)
    assert L.kl_product(Q_rf, Q_cf) < 0.01
    # the entropy term matters: the optimum at a 10x smaller lambda is far from this one
    assert L.kl_product(D.maxent_closed_form(beta, lam / 10), Q_cf) > 0.1
    # and it is a maximiser of E_q f + lambda H(q): random perturbations do not improve it
    obj = lambda Q: float((Q * beta).sum() + lam * L.entropy(Q))
    for _ in range(20):
        Qp = L.softmax_rows(np.log(Q_cf) + rng.normal(0, 0.1, Q_cf.shape))
        assert obj(Qp) <= obj(Q_cf) + 1e-12


def test_oracle_normalisation_and_label_noise():
    land = L.RNABinding(seq_len=20, target_len=20, noise_sd=0.02)
    comp = "".join(L.COMPLEMENT[c] for c in land.target)[::-1]
    assert abs(land.fitness([comp])[0] - 1.0) < 1e-12  # the perfect complement has fitness 1
    rnd = L.to_str(np.random.default_rng(5).integers(0, 4, (200, 20)))
    fit = land.fitness(rnd)
    assert 0 <= fit.min() and fit.max() < 0.9
    rng = np.random.default_rng(6)
    mu = np.array([0.0, 0.01, 0.3, 0.995])
    draws = np.stack([land.noisy(mu, rng) for _ in range(40000)])
    assert draws.min() >= 0 and draws.max() <= 1
    assert np.allclose(draws.mean(0), land.expected_label(mu), atol=4e-4)
    assert np.allclose((draws >= 0.3).mean(0), land.exceed_prob(mu, 0.3), atol=0.01)


def test_biswas_respects_trust_region_and_adalead_proposes_new_sequences():
    rng = np.random.default_rng(7)
    Ls = 12
    beta = rng.normal(0, 0.1, (Ls, 4))
    f = lambda X1h: X1h @ beta.reshape(-1)
    seed = rng.integers(0, 4, Ls)
    Xb = D.biswas(f, seed, 200, 0.01, rng, trust_radius=3, n_step=50)
    # proposals beyond the radius are rejected (initial states, seed + Poisson(1)+1 mutations as in the
    # official code, may start outside and stay there only if no proposal is ever accepted)
    assert np.mean((Xb != seed).sum(1) <= 3) > 0.95
    Xfree = D.biswas(f, seed, 200, 0.01, rng, trust_radius=12, n_step=50)
    assert np.mean((Xfree != seed).sum(1) <= 3) < 0.5  # without the region chains wander off
    assert f(L.onehot(Xb)).mean() > f(L.onehot(seed[None]))[0]  # MCMC climbs the predictor
    Xtr = rng.integers(0, 4, (300, Ls))
    ytr = f(L.onehot(Xtr)) + rng.normal(0, 0.01, 300)
    Xa = D.adalead(f, Xtr, ytr, 100, 0.1, rng)
    train = {r.tobytes() for r in Xtr.astype(np.int8)}
    assert len(Xa) == 100 and not any(r.tobytes() in train for r in Xa.astype(np.int8))
    assert len({r.tobytes() for r in Xa.astype(np.int8)}) == 100
    assert f(L.onehot(Xa)).min() > np.quantile(ytr, 0.9)


def test_mdre_recovers_a_known_ratio():
    from icml25.studies.design_select.data_dre import MDRE

    rng = np.random.default_rng(8)
    Ls = 8
    P = L.mutant_probs(L.SEEDS[3][:Ls], 0.9)
    Q = D.maxent_closed_form(rng.normal(0, 0.2, (Ls, 4)), 0.3)
    Xp, Xq = L.sample_product(P, 3000, rng), L.sample_product(Q, 3000, rng)
    m = MDRE.fit([L.onehot(Xp), L.onehot(Xq)], seed=0, n_hidden=32, n_epoch=150, lr=1e-2, dropout=0.0)
    Xt = L.sample_product(P, 2000, rng)
    est = m.log_ratios(L.onehot(Xt))[:, 0]
    true = np.log(L.density_ratio(Xt, Q, P))
    assert np.corrcoef(est, true)[0, 1] > 0.9


def test_calibrator_is_identity_on_calibrated_forecasts():
    rng = np.random.default_rng(9)
    mu = rng.uniform(0.3, 0.7, 3000)
    sig = np.full(3000, 0.05)
    y = mu + sig * rng.standard_normal(3000)
    cal = I.fit_calibrator(y, mu, sig)
    q = np.linspace(0.05, 0.95, 10)
    assert np.abs(np.interp(q, *cal) - q).max() < 0.05
    grid = np.linspace(0, 1, 201)
    m = I.calibrated_forecast(cal, np.array([0.4, 0.6]), np.array([0.05, 0.05]), "mean", 0.5, grid)
    assert np.allclose(m, [0.4, 0.6], atol=0.01)
    # a miscalibrated (overconfident, biased) forecast is corrected towards the truth
    cal_b = I.fit_calibrator(y, mu + 0.05, sig / 3)
    mb = I.calibrated_forecast(cal_b, np.array([0.45]), np.array([0.05 / 3]), "mean", 0.5, grid)
    assert abs(mb[0] - 0.40) < 0.02
