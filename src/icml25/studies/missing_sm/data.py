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


def halfspace(mu, Sigma, rng, outside: float):
    """Sec. 5.2.1: a random hyperplane (uniform direction a) with a fraction `outside` of N(mu, Sigma) beyond
    it; the domain is {a^T x <= b}."""
    from scipy.stats import norm

    a = rng.standard_normal(len(mu))
    a /= np.linalg.norm(a)
    b = float(a @ mu + norm.ppf(1 - outside) * np.sqrt(a @ Sigma @ a))
    return a, b


def quantile_box(mu, Sigma, dims: int, q: float):
    """Sec. 5.1.1 / App. E.3.1: lower bounds at the q-quantile of each of the first `dims` coordinates."""
    from scipy.stats import norm

    lo = np.full(len(mu), -np.inf)
    lo[:dims] = mu[:dims] + norm.ppf(q) * np.sqrt(np.diag(Sigma)[:dims])
    return lo


def sample_truncated(mu, Sigma, n, rng, lo=None, a=None, b=None):
    """n rows of N(mu, Sigma) restricted to {x > lo} and {a^T x <= b}, by rejection (in blocks)."""
    out, have = [], 0
    while have < n:
        x = sample(mu, Sigma, 2 * n, rng)
        keep = np.ones(len(x), bool)
        if lo is not None:
            keep &= (x > lo).all(1)
        if a is not None:
            keep &= x @ a <= b
        out.append(x[keep])
        have += int(keep.sum())
    return np.concatenate(out)[:n]


def generate(seed: int, data_cfg: dict) -> dict:
    """Everything one seed needs, as arrays (written to raw/seed{seed}.npz).

    Untruncated (data.truncate false, the mini scale): exactly the original streams. Truncated (the paper's
    Sec. 5.1.1 / 5.2.1 set-ups): graphs on a random halfspace with `trunc_outside` of the mass cut off
    ({kind}_a, {kind}_b); the Gaussian above the `gauss_trunc_q` quantile of its first `gauss_trunc_dims`
    coordinates (gauss_lo). gauss_* arrays carry a leading repeat axis (gauss_reps independent problems).
    d_sweep: one star graph per extra dimension dd (dsw{dd}_*), truncated like the graphs."""
    d, n = int(data_cfg["d"]), int(data_cfg["n"])
    trunc = bool(data_cfg.get("truncate", False))
    out = {}
    for gi, kind in enumerate(data_cfg["graphs"]):
        rng = _rng(data_cfg["data_seed"], seed, 1, gi)
        P = random_graph_precision(d, kind, rng, data_cfg["hub_prob"], data_cfg["dense_prob"],
                                   data_cfg["w_low"], data_cfg["w_high"], data_cfg["min_eig"])
        mu = np.full(d, float(data_cfg["mean"]))
        out[f"{kind}_P"] = P
        out[f"{kind}_mu"] = mu
        if trunc:
            a, b = halfspace(mu, np.linalg.inv(P), rng, float(data_cfg["trunc_outside"]))
            out[f"{kind}_a"], out[f"{kind}_b"] = a, np.asarray(b)
            out[f"{kind}_X"] = sample_truncated(mu, np.linalg.inv(P), n, rng, a=a, b=b)
        else:
            out[f"{kind}_X"] = sample(mu, np.linalg.inv(P), n, rng)
        out[f"{kind}_U"] = rng.random((n, d))
    if data_cfg.get("gauss", True):
        keys = ("gauss_mu", "gauss_P", "gauss_X", "gauss_U", "gauss_Xtest", "gauss_lo")
        reps = {k: [] for k in keys}
        for k in range(int(data_cfg.get("gauss_reps", 1))):
            rng = _rng(data_cfg["data_seed"], seed, 2) if k == 0 else _rng(data_cfg["data_seed"], seed, 2, k)
            mu, P, S = paper_gaussian(rng, int(data_cfg["gauss_d"]), float(data_cfg["mean"]))
            lo = quantile_box(mu, S, int(data_cfg["gauss_trunc_dims"]), float(data_cfg["gauss_trunc_q"])) if trunc \
                else np.full(len(mu), -np.inf)
            reps["gauss_mu"].append(mu)
            reps["gauss_P"].append(P)
            reps["gauss_lo"].append(lo)
            if trunc:  # the test rows come from the truncated law too (the score is the Gaussian's inside X)
                reps["gauss_X"].append(sample_truncated(mu, S, int(data_cfg["gauss_n"]), rng, lo=lo))
                reps["gauss_U"].append(rng.random(reps["gauss_X"][-1].shape))
                reps["gauss_Xtest"].append(sample_truncated(mu, S, int(data_cfg["gauss_n_test"]), rng, lo=lo))
            else:
                reps["gauss_X"].append(sample(mu, S, int(data_cfg["gauss_n"]), rng))
                reps["gauss_U"].append(rng.random(reps["gauss_X"][-1].shape))
                reps["gauss_Xtest"].append(sample(mu, S, int(data_cfg["gauss_n_test"]), rng))
        out.update({k: np.stack(v) for k, v in reps.items()})
    for dd in data_cfg.get("d_sweep", []) or []:
        dd = int(dd)
        rng = _rng(data_cfg["data_seed"], seed, 5, dd)
        P = random_graph_precision(dd, "star", rng, data_cfg["hub_prob"], data_cfg["dense_prob"],
                                   data_cfg["w_low"], data_cfg["w_high"], data_cfg["min_eig"])
        mu = np.full(dd, float(data_cfg["mean"]))
        out[f"dsw{dd}_P"], out[f"dsw{dd}_mu"] = P, mu
        if trunc:
            a, b = halfspace(mu, np.linalg.inv(P), rng, float(data_cfg["trunc_outside"]))
            out[f"dsw{dd}_a"], out[f"dsw{dd}_b"] = a, np.asarray(b)
            out[f"dsw{dd}_X"] = sample_truncated(mu, np.linalg.inv(P), n, rng, a=a, b=b)
        else:
            out[f"dsw{dd}_X"] = sample(mu, np.linalg.inv(P), n, rng)
        out[f"dsw{dd}_U"] = rng.random((n, dd))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def mask(U: np.ndarray, p_miss: float) -> np.ndarray:
    """MCAR: True where observed (each coordinate missing independently w.p. p_miss)."""
    return U >= float(p_miss)
