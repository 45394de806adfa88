"""Procedural data of the study (numpy only): GGM graphs (star, dense) and the paper's d=10 Gaussian.

Every draw is a function of (data_seed, seed): seed s of a job uses its own graph / covariance and
its own samples, as the paper's repeats do. MCAR masks are thresholded uniforms, so the masks of
the p_miss levels of one seed are nested (row values and mask draws shared; only p_miss differs).
"""
from __future__ import annotations

import numpy as np


def _rng(*keys: int) -> np.random.Generator:
    return np.random.default_rng([int(k) for k in keys])


def random_graph_precision(d: int, kind: str, rng: np.random.Generator, hub_prob: float = 0.9,
                           dense_prob: float = 0.5, w_low: float = 0.2, w_high: float = 0.35,
                           min_eig: float = 0.2) -> np.ndarray:
    """Precision of a GGM (Sec. 5.2). star: node 0 joined to each other node w.p. hub_prob, no other
    edges; dense: every pair w.p. dense_prob. |weight| ~ U[w_low, w_high] with a random sign; then a
    diagonal shift so that lambda_min(P) = min_eig."""
    W = np.zeros((d, d))
    if kind == "star":
        for j in range(1, d):
            if rng.random() < hub_prob:
                W[0, j] = W[j, 0] = rng.uniform(w_low, w_high) * rng.choice([-1.0, 1.0])
    elif kind == "dense":
        for i in range(d):
            for j in range(i + 1, d):
                if rng.random() < dense_prob:
                    W[i, j] = W[j, i] = rng.uniform(w_low, w_high) * rng.choice([-1.0, 1.0])
    else:
        raise ValueError(f"unknown graph kind {kind!r}")
    shift = min_eig - np.linalg.eigvalsh(W).min()
    return W + shift * np.eye(d)


def paper_gaussian(rng: np.random.Generator, d: int = 10, mean: float = 0.5):
    """App. E.3.1: eigenvalues U[0.5, 1.5] and Haar eigenvectors for dims 1..d-1, then
    X_d = 2 X_1 + Z/2 with Z independent, Var(Z) = Var(X_1); mean 0.5 in every coordinate."""
    k = d - 1
    Q, R = np.linalg.qr(rng.standard_normal((k, k)))
    Q = Q * np.sign(np.diag(R))
    S9 = Q @ np.diag(rng.uniform(0.5, 1.5, k)) @ Q.T
    S = np.zeros((d, d))
    S[:k, :k] = S9
    S[k, :k] = S[:k, k] = 2 * S9[0]
    S[k, k] = 4 * S9[0, 0] + 0.25 * S9[0, 0]
    mu = np.full(d, mean)
    return mu, np.linalg.inv(S), S


def sample(mu, Sigma, n, rng):
    return rng.multivariate_normal(mu, Sigma, size=n, method="cholesky")


def generate(seed: int, data_cfg: dict) -> dict:
    """Everything one seed needs, as arrays (written to raw/seed{seed}.npz)."""
    d, n = int(data_cfg["d"]), int(data_cfg["n"])
    out = {}
    for gi, kind in enumerate(data_cfg["graphs"]):
        rng = _rng(data_cfg["data_seed"], seed, 1, gi)
        P = random_graph_precision(d, kind, rng, data_cfg["hub_prob"], data_cfg["dense_prob"],
                                   data_cfg["w_low"], data_cfg["w_high"], data_cfg["min_eig"])
        mu = np.full(d, float(data_cfg["mean"]))
        out[f"{kind}_P"] = P
        out[f"{kind}_mu"] = mu
        out[f"{kind}_X"] = sample(mu, np.linalg.inv(P), n, rng)
        out[f"{kind}_U"] = rng.random((n, d))
    if data_cfg.get("gauss", True):
        rng = _rng(data_cfg["data_seed"], seed, 2)
        mu, P, S = paper_gaussian(rng, int(data_cfg["gauss_d"]), float(data_cfg["mean"]))
        out["gauss_mu"], out["gauss_P"] = mu, P
        out["gauss_X"] = sample(mu, S, int(data_cfg["gauss_n"]), rng)
        out["gauss_U"] = rng.random(out["gauss_X"].shape)
        out["gauss_Xtest"] = sample(mu, S, int(data_cfg["gauss_n_test"]), rng)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def mask(U: np.ndarray, p_miss: float) -> np.ndarray:
    """MCAR: True where observed (each coordinate missing independently w.p. p_miss)."""
    return U >= float(p_miss)
