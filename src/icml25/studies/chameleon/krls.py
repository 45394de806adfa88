"""Chameleon's weights from domain embeddings (numpy only): affinity, kernel ridge leverage scores, softmax.

As in the official code (LIONS-EPFL/Chameleon, utils.py / compute_chameleon_weights.py):
  Omega = KernelCenterer(X X^T);  S_i = [Omega (Omega + lambda k I)^-1]_ii;  S <- S / sum(S)
  pretraining  alpha = softmax((1/S) / 5)   (common domains up)
  finetuning   alpha = softmax(S / 0.2)     (unique domains up)
One deviation, from the issue: Omega is scale-dependent (a tiny proxy's hidden states are much smaller than
an 82M model's), so with `normalise=True` Omega is divided by trace(Omega)/k before adding lambda k I
(eigenvalues then average 1); lambda is swept. normalise=False is the official formula verbatim.
"""
from __future__ import annotations

import numpy as np


def affinity(X: np.ndarray, normalise: bool = True) -> np.ndarray:
    from sklearn.preprocessing import KernelCenterer

    X = np.asarray(X, dtype=np.float64)
    omega = KernelCenterer().fit_transform(X @ X.T)
    omega = (omega + omega.T) / 2
    if normalise:
        tr = np.trace(omega)
        if tr > 0:
            omega = omega / (tr / len(omega))
    return omega


def krls_raw(omega: np.ndarray, lam: float) -> np.ndarray:
    """Unnormalised KRLS diag(Omega (Omega + lam k I)^-1)."""
    k = len(omega)
    return np.diag(omega @ np.linalg.inv(omega + lam * k * np.eye(k))).copy()


def krls(omega: np.ndarray, lam: float) -> np.ndarray:
    s = krls_raw(omega, lam)
    if not s.sum() > 0:  # a single domain (or identical ones): nothing to tell apart
        return np.full(len(s), 1.0 / len(s))
    return s / s.sum()


def softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def pretrain_weights(S: np.ndarray, temperature: float = 5.0) -> np.ndarray:
    return softmax(1.0 / (S + 1e-12) / temperature)


def finetune_weights(S: np.ndarray, temperature: float = 0.2) -> np.ndarray:
    return softmax(S / temperature)


def chameleon(X: np.ndarray, lam: float, normalise: bool = True, pt_temp: float = 5.0, ft_temp: float = 0.2) -> dict:
    omega = affinity(X, normalise)
    S = krls(omega, lam)
    return {"omega": omega, "S": S, "pretrain": pretrain_weights(S, pt_temp), "finetune": finetune_weights(S, ft_temp)}


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    r = spearmanr(np.asarray(a), np.asarray(b)).statistic
    return float(r) if np.isfinite(r) else 0.0
