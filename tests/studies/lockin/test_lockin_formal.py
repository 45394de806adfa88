"""Faithfulness of the Section 3 model: the trust-matrix threshold, the precision recursion, the control."""
from __future__ import annotations

import math

import numpy as np
import pytest

from icml25.studies.lockin import formal as F


def _star(rho2, N=5):
    l1, l2 = F.star_lambdas(rho2, N)
    return F.star_trust(N, l1, l2)


@pytest.mark.parametrize("N,l1,l2", [(101, 0.1, 0.1), (101, 0.03, 0.5), (5, 0.7, 0.2), (2, 1.3, 0.4), (37, 0.01, 2.0)])
def test_star_spectral_radius_is_sqrt_n_minus_1_l1_l2(N, l1, l2):
    W = F.star_trust(N, l1, l2)
    assert W[0, 1:].tolist() == [l1] * (N - 1) and W[1:, 0].tolist() == [l2] * (N - 1)
    assert np.count_nonzero(W) == 2 * (N - 1)
    assert abs(F.spectral_radius(W) - math.sqrt((N - 1) * l1 * l2)) < 1e-10


@pytest.mark.parametrize("rho2", [0.5, 1.0, 1.5])
def test_star_lambdas_hit_the_requested_product(rho2):
    l1, l2 = F.star_lambdas(rho2, 101)
    assert abs(100 * l1 * l2 - rho2) < 1e-12 and l1 == l2
    l1, l2 = F.star_lambdas(rho2, 101, lambda2=0.5)
    assert l2 == 0.5 and abs(100 * l1 * l2 - rho2) < 1e-12


def test_rescaled_recursion_equals_the_plain_recursion():
    """The log-scale bookkeeping is exact: same nu and q as iterating the paper's equations directly."""
    rng = np.random.default_rng(3)
    N, T, R, mu = 4, 40, 3, 0.7
    W = rng.random((N, N)) * 0.6
    sigma = np.array([0.5, 1.0, 2.0, np.inf])  # the last agent observes nothing
    res = F.simulate(W, sigma, mu, T, R, np.random.default_rng(11), record=[1, 7, T])
    g = np.random.default_rng(11)
    prec = 1 / sigma**2
    S, q, m, ref = np.zeros((R, N)), np.zeros(N), np.zeros((R, N)), {}
    for t in range(1, T + 1):
        S += mu + np.where(np.isfinite(sigma), sigma, 0) * g.standard_normal((R, N))
        p, mu_hat = t * prec, S / t
        q = p + W @ q  # q_{t+1} = p_{t+1} + W q_t
        m = mu_hat * p + m @ W.T  # nu_{t+1} q_{t+1} = mu_hat p + W (nu_t q_t)
        with np.errstate(divide="ignore", invalid="ignore"):
            ref[t] = (m / q, np.log(q))
    for k, t in enumerate([1, 7, T]):
        np.testing.assert_allclose(res["nu"][k], ref[t][0], rtol=1e-10)
        np.testing.assert_allclose(res["log_q"][k], ref[t][1], rtol=1e-12)


def test_below_threshold_error_halves_from_T1000_to_T4000():
    """rho^2 = 0.5, N = 5: exact RMS error (derived independently) at T=4000 is under half that at T=1000,
    and the simulation reproduces the exact error over 2000 runs."""
    N = 5
    W, sigma = _star(0.5, N), np.ones(N)
    e1, e4 = F.exact_error_rms(W, sigma, 1000), F.exact_error_rms(W, sigma, 4000)
    assert e4 < 0.5 * e1
    res = F.simulate(W, sigma, 0.0, 4000, 2000, np.random.default_rng(0), record=[1000, 4000])
    mc = np.sqrt(np.mean(res["nu"][:, :, 0] ** 2, axis=1))
    np.testing.assert_allclose(mc, [e1, e4], rtol=0.05)
    assert 0.45 < mc[1] / mc[0] < 0.55  # the 1/sqrt(T) law in the simulated runs


def test_above_threshold_belief_freezes_while_confidence_explodes():
    N = 5
    W, sigma = _star(1.5, N), np.ones(N)
    res = F.simulate(W, sigma, 0.0, 4000, 200, np.random.default_rng(1), record=[1000, 2000, 4000])
    nu = res["nu"][:, :, 0]
    assert np.max(np.abs(nu[2] - nu[0])) < 1e-3  # frozen between T=1000 and T=4000
    assert np.std(nu[2]) > 0.05  # ... at different (false) values in different runs
    q_over_T = res["log_q"][:, 0] - np.log([1000, 2000, 4000])
    assert np.all(np.diff(q_over_T) > 100)  # q_T/T grows without bound (log-scale: exponentially)
    assert np.all(np.isfinite(nu))


@pytest.mark.parametrize("rho", [0.8, 1.25])
def test_threshold_holds_for_a_general_trust_matrix(rho):
    """Theorem: lock-in iff rho(W) > 1, for any nonnegative W (here a random dense one)."""
    rng = np.random.default_rng(5)
    W = rng.random((4, 4))
    W *= rho / F.spectral_radius(W)
    res = F.simulate(W, np.ones(4), 0.0, 3000, 300, rng, record=[300, 3000])
    rms = np.sqrt(np.mean(res["nu"][:, :, 0] ** 2, axis=1))
    if rho > 1:
        assert abs(rms[1] / rms[0] - 1) < 1e-6
    else:
        assert 0.25 < rms[1] / rms[0] < 0.4  # sqrt(300/3000) = 0.32


def test_plain_degroot_shows_no_threshold_and_differs_from_the_model():
    N = 5
    W, sigma = _star(1.5, N), np.ones(N)
    dg = F.simulate_degroot(W, sigma, 0.0, 4000, 1000, np.random.default_rng(2), record=[1000, 4000])
    rms = np.sqrt(np.mean(dg["nu"][:, :, 0] ** 2, axis=1))
    assert 0.4 < rms[1] / rms[0] < 0.6  # still converging at rho^2 = 1.5: no lock-in
    model = F.simulate(W, sigma, 0.0, 4000, 1000, np.random.default_rng(2), record=[1000, 4000])
    rms_m = np.sqrt(np.mean(model["nu"][:, :, 0] ** 2, axis=1))
    assert rms_m[1] / rms_m[0] > 0.99 and rms_m[1] > 5 * rms[1]


def test_no_overflow_far_above_threshold():
    W = _star(100.0, 11)
    res = F.simulate(W, np.ones(11), 0.0, 2000, 3, np.random.default_rng(0))
    assert np.all(np.isfinite(res["nu"][1:])) and np.all(np.isfinite(res["log_q"]))
    assert res["log_q"][-1, 0] > 2000 * math.log(10) * 0.99  # q ~ rho^T with rho = 10


def test_summary_flags_freeze_and_convergence():
    T = 2000
    out = {}
    for rho2 in (0.5, 1.5):
        res = F.simulate(_star(rho2, 11), np.ones(11), 1.0, T, 15, np.random.default_rng(0))
        out[rho2] = F.summarise(res, 1.0, T)
    assert out[0.5]["err_slope"] < -0.3 and out[1.5]["drift"] < 1e-6 and out[1.5]["err_slope"] > -0.1
    assert out[1.5]["q_growth"] > 1 and abs(out[0.5]["q_growth"]) < 0.1
    assert out[1.5]["entropy_T"] < out[0.5]["entropy_T"] - 50
