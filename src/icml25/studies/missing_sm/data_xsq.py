"""Data for the non-Gaussian d-sweep (xsq.py): a star-graph interaction matrix K and exact Gibbs samples."""
from __future__ import annotations

import numpy as np


def star_K(d: int, rng: np.random.Generator, hub_prob: float = 0.9, w_low: float = 0.2, w_high: float = 0.35):
    """Star graph on node 0: edge (0, j) with prob hub_prob, weight U[w_low, w_high] (K >= 0 so the density is
    integrable). Returns K (d, d) symmetric with zero diagonal."""
    K = np.zeros((d, d))
    for j in range(1, d):
        if rng.random() < hub_prob:
            K[0, j] = K[j, 0] = rng.uniform(w_low, w_high)
    return K


def gibbs(mu, p, K, n: int, rng: np.random.Generator, burn: int = 200, thin: int = 1):
    """n independent chains (one per returned row), systematic-scan Gibbs with the exact Gaussian full
    conditionals x_j | x_-j ~ N(p_j mu_j / a_j, 1/a_j), a_j = p_j + sum_k K_jk x_k^2; `burn` sweeps
    (the state after the last sweep is returned). Deterministic given rng."""
    mu, p, K = np.asarray(mu, float), np.asarray(p, float), np.asarray(K, float)
    d = len(mu)
    x = rng.standard_normal((n, d)) / np.sqrt(p) + mu
    for _ in range(int(burn) * int(thin)):
        for j in range(d):
            a = p[j] + (x**2) @ K[:, j]
            x[:, j] = p[j] * mu[j] / a + rng.standard_normal(n) / np.sqrt(a)
    return x


def make(d: int, n: int, seed_seq, hub_prob=0.9, w_low=0.2, w_high=0.35, mean=0.5, burn=200):
    """One d-sweep problem: (X (n,d) float32, K, mu, p, U (n,d) uniforms for the MCAR masks)."""
    rng = np.random.default_rng(seed_seq)
    K = star_K(d, rng, hub_prob, w_low, w_high)
    mu, p = np.full(d, float(mean)), np.ones(d)
    X = gibbs(mu, p, K, n, rng, burn)
    U = rng.random((n, d))
    return X.astype(np.float32), K, mu, p, U
