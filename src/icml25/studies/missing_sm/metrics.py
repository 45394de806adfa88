"""Evaluation metrics in numpy only (the evaluate stage imports no torch): the ROC/AUC over a regularisation
path and the Fisher divergence of a Gaussian estimate."""
from __future__ import annotations

import numpy as np


def roc_auc(path: np.ndarray, P_true: np.ndarray, threshold: float) -> tuple[float, np.ndarray, np.ndarray]:
    """ROC over the regularisation path (App. E.3.2): edges |P_ij| > threshold (i < j) at each
    snapshot vs the true graph; (0,0) and (1,1) added, sorted by FPR, trapezoid rule."""
    d = P_true.shape[0]
    iu = np.triu_indices(d, 1)
    truth = np.abs(P_true[iu]) > 0
    pos, neg = truth.sum(), (~truth).sum()
    fpr, tpr = [0.0, 1.0], [0.0, 1.0]
    for P in path:
        est = np.abs(P[iu]) > threshold
        tpr.append((est & truth).sum() / pos if pos else 0.0)
        fpr.append((est & ~truth).sum() / neg if neg else 0.0)
    order = np.lexsort((np.asarray(tpr), np.asarray(fpr)))
    f, t = np.asarray(fpr)[order], np.asarray(tpr)[order]
    return float(np.trapezoid(t, f)), f, t


def fisher_divergence(mu_hat, P_hat, mu, P, x) -> float:
    """E||s(x) - s_hat(x)||^2 on complete rows x (B, d) of one problem, s(x) = -P (x - mu) (float64; the
    same quantity as sm.fisher_divergence, which the tests compare it with)."""
    x = np.asarray(x, np.float64)
    s = -(x - np.asarray(mu, np.float64)) @ np.asarray(P, np.float64).T
    sh = -(x - np.asarray(mu_hat, np.float64)) @ np.asarray(P_hat, np.float64).T
    return float(((s - sh) ** 2).sum(-1).mean())
