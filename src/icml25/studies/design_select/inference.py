"""Tests and selection rules: the prediction-powered p-value (the paper's Alg. 2) and its baselines.

All p-values are for H_lambda: theta_lambda < tau against theta_lambda >= tau (one-sided, 'larger').
Standard deviations use ddof=0, as ppi-python and the official code (np.std).
"""
from __future__ import annotations

import numpy as np
from scipy.stats import norm


def self_normalise(w: np.ndarray, axis: int = -1) -> np.ndarray:
    return w / w.sum(axis=axis, keepdims=True) * w.shape[axis]


def pp_estimate(gy, f_lab, w, f_design):
    """Prediction-powered estimate and standard error, vectorised over leading axes of the labelled
    arrays (..., n): theta_hat = mean f(X~) + mean w (g(Y) - f(X)),
    sigma^2 = Var f(X~)/N + Var[w (g(Y) - f(X))]/n, with w self-normalised to sum to n."""
    n, N = gy.shape[-1], f_design.shape[-1]
    w = self_normalise(w)
    rect = w * (gy - f_lab)
    est = f_design.mean(-1) + rect.mean(-1)
    se = np.sqrt(f_design.var(-1) / N + rect.var(-1) / n)
    return est, np.maximum(se, 1e-16)


def pp_pvalue(gy, f_lab, w, f_design, tau):
    est, se = pp_estimate(gy, f_lab, w, f_design)
    return norm.sf((est - tau) / se)


def labelled_only_estimate(gy, w):
    """Importance-weighted mean of g(Y) over the labelled data alone (no predictions)."""
    n = gy.shape[-1]
    v = self_normalise(w) * gy
    return v.mean(-1), np.maximum(v.std(-1) / np.sqrt(n), 1e-16)


def prediction_only_estimate(f_design):
    """z-test on the mean prediction over the designs (treats predictions as labels)."""
    return f_design.mean(-1), np.maximum(f_design.std(-1) / np.sqrt(f_design.shape[-1]), 1e-16)


def pvalues(est, se, taus):
    """(..., n_tau) one-sided p-values of theta < tau."""
    taus = np.asarray(taus)
    return norm.sf((np.asarray(est)[..., None] - taus) / np.asarray(se)[..., None])


def bonferroni_select(p, alpha: float, axis: int = -2):
    """Select {lambda : p_lambda <= alpha / |Lambda|}; `axis` indexes the configurations."""
    return p <= alpha / p.shape[axis]


def selection_metrics(selected, theta, taus):
    """selected: (T, K, n_tau) bool; theta: (K,) true values. Per tau: error rate (share of trials
    selecting any configuration with theta < tau), selection rate (share selecting anything),
    mean over selecting trials of the worst selected true theta (nan if none)."""
    selected = np.asarray(selected, bool)
    theta = np.asarray(theta, float)
    taus = np.asarray(taus, float)
    T = selected.shape[0]
    if selected.shape[1] == 0:  # empty menu: nothing can be selected
        z = np.zeros(len(taus))
        return {"error_rate": z, "selection_rate": z, "worst_theta": np.full(len(taus), np.nan), "n_trials": T}
    any_sel = selected.any(1)  # (T, n_tau)
    worst = np.where(selected, theta[None, :, None], np.inf).min(1)  # (T, n_tau)
    err = (selected & (theta[None, :, None] < taus[None, None, :])).any(1)
    worst_mean = np.array([worst[any_sel[:, j], j].mean() if any_sel[:, j].any() else np.nan
                           for j in range(len(taus))])
    return {"error_rate": err.mean(0), "selection_rate": any_sel.mean(0), "worst_theta": worst_mean,
            "n_trials": T}


# ---- CalibratedForecasts baseline ---------------------------------------------------------------

def fit_calibrator(y, mu, sigma):
    """Recalibrate Gaussian forecasts on labelled data (official CalibratedForecasts): F_i =
    Phi((y_i - mu_i)/sigma_i); isotonic regression of the empirical CDF of the F's on F."""
    from sklearn.isotonic import IsotonicRegression

    F = norm.cdf(y, loc=mu, scale=np.maximum(sigma, 1e-6))
    emp = (F[:, None] <= F[None, :]).mean(0)
    ir = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(F, emp)
    return np.asarray(ir.X_thresholds_), np.asarray(ir.y_thresholds_)


def calibrated_forecast(cal, mu, sigma, g: str, gamma: float, grid: np.ndarray):
    """Forecast of E[g(Y)] for each design under the calibrated CDF R(Phi((y - mu)/sigma)): with the
    labels' support truncated to [grid[0], grid[-1]], E[Y] = grid[0] + int (1 - F(y)) dy (trapezoid on
    `grid`; the RNA labels lie in [0, 1]: grid over [0, 1]); P(Y >= gamma) = 1 - F(gamma)."""
    xt, yt = cal
    s = np.maximum(sigma, 1e-6)
    if g == "exceed":
        return 1.0 - np.interp(norm.cdf(gamma, loc=mu, scale=s), xt, yt)
    F = np.interp(norm.cdf(grid[None, :], loc=mu[:, None], scale=s[:, None]), xt, yt)
    return grid[0] + np.trapezoid(1.0 - F, grid, axis=1)


def forecast_grid(mu, sigma, n: int) -> np.ndarray:
    """Integration grid for real-valued labels (GB1): the official limits min(mu - 3 sigma) and
    max(mu + 3 sigma) over the designs, widened to include 0."""
    lo = min(0.0, float(np.min(mu - 3 * sigma)))
    hi = max(0.0, float(np.max(mu + 3 * sigma)))
    return np.linspace(lo, hi, int(n))
