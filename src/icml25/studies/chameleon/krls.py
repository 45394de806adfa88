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


def spectrum(omega: np.ndarray) -> np.ndarray:
    """Eigenvalues of the (symmetric) affinity, largest first: the KRLS are
    S_i = sum_j U_ij^2 sigma_j / (sigma_j + lambda k), so they separate domains only where sigma_j >~ lambda k."""
    return np.sort(np.linalg.eigvalsh(np.asarray(omega, dtype=np.float64)))[::-1].copy()


def krls_from_spectrum(omega: np.ndarray, lam: float) -> np.ndarray:
    """The unnormalised KRLS through the eigendecomposition of Omega (equal to krls_raw: a check that the
    logged eigenvalues are those of the kernel the scores come from)."""
    sig, U = np.linalg.eigh(np.asarray(omega, dtype=np.float64))
    k = len(omega)
    return (U ** 2) @ (sig / (sig + lam * k))


def saturated(weights, above: float = 0.9) -> bool:
    """A mixture is saturated when one domain's weight is above `above` (near one-hot)."""
    return bool(np.max(np.asarray(weights, dtype=np.float64)) > above)


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
    return {"omega": omega, "eig": spectrum(omega), "S": S, "pretrain": pretrain_weights(S, pt_temp), "finetune": finetune_weights(S, ft_temp)}


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    r = spearmanr(np.asarray(a), np.asarray(b)).statistic
    return float(r) if np.isfinite(r) else 0.0
