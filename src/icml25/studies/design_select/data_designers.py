"""Design algorithms.

Known-density-ratio menu: site-wise categorical design distributions q solving
    max_q  E_q[f(X)] + lambda * H(q)
in closed form for ridge (separable: q_l(a) ∝ exp(beta_la / lambda)) and by REINFORCE for any
predictor (the official gb1.solve_max_entropy_library: score-function gradient of the same
objective with w = f(x) - lambda (1 + log q(x))).

Estimated-density-ratio menu: AdaLead-style greedy evolver (threshold kappa) and Biswas-style
MCMC (temperature T), following the official designers.py.
"""
from __future__ import annotations

import numpy as np

from . import data_landscape as L


def maxent_closed_form(beta: np.ndarray, lam: float) -> np.ndarray:
    return L.softmax_rows(beta / lam)


def reinforce_maxent(predict, n_sites: int, n_alpha: int, lam: float, rng: np.random.Generator,
                     n_iter: int = 400, n_sample: int = 500, lr: float = 0.05,
                     init_logits: np.ndarray | None = None, average_last: float = 0.5) -> np.ndarray:
    """REINFORCE (Adam ascent on the site-wise logits) for max_q E_q f + lambda H(q).

    Gradient estimate: mean_n (w_n - mean w) (onehot(x_n) - q), w_n = f(x_n) - lambda (1 + log q(x_n));
    the mean baseline only reduces variance. The returned q is the softmax of the logits averaged
    over the last `average_last` share of iterations (Polyak averaging)."""
    theta = np.zeros((n_sites, n_alpha)) if init_logits is None else np.array(init_logits, float)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    b1, b2, eps = 0.9, 0.999, 1e-8
    avg, n_avg = np.zeros_like(theta), 0
    start_avg = int(n_iter * (1 - average_last))
    ar = np.arange(n_sites)
    for t in range(n_iter):
        q = L.softmax_rows(theta)
        X = L.sample_product(q, n_sample, rng)
        logq = np.log(q)[ar[None, :], X].sum(1)
        w = predict(L.onehot(X, n_alpha)) - lam * (1.0 + logq)
        adv = w - w.mean()
        oh = np.zeros((n_sample, n_sites, n_alpha))
        oh[np.arange(n_sample)[:, None], ar[None, :], X] = 1.0
        grad = np.einsum("n,nla->la", adv, oh) / n_sample - adv.mean() * q
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad ** 2
        mh, vh = m / (1 - b1 ** (t + 1)), v / (1 - b2 ** (t + 1))
        theta = theta + lr * mh / (np.sqrt(vh) + eps)
        theta -= theta.mean(1, keepdims=True)
        if t >= start_avg:
            avg += theta
            n_avg += 1
    return L.softmax_rows(avg / max(n_avg, 1))


# ---- AdaLead ------------------------------------------------------------------------------------

def _mutate(X: np.ndarray, p_site: float, n_alpha: int, rng) -> np.ndarray:
    """get_mutant: each site redrawn uniformly from the alphabet with prob p_site."""
    mask = rng.random(X.shape) < p_site
    return np.where(mask, rng.integers(0, n_alpha, X.shape), X)


def adalead(predict, X_train: np.ndarray, y_train: np.ndarray, n_design: int, threshold: float,
            rng: np.random.Generator, n_alpha: int = 4, max_queries: int | None = None,
            mutation_rate: float = 1.0, batch: int = 1000) -> np.ndarray:
    """Official AdaLead (no recombination): parents = training sequences with y >= ymax (1 - kappa);
    rollouts mutate each node until a child's prediction falls below its root's; all children are
    candidates; return the n_design candidates with the best predictions."""
    max_queries = max_queries or 5 * n_design
    seen = {r.tobytes() for r in X_train.astype(np.int8)}
    ymax = y_train.max()
    parents = X_train[y_train >= ymax * (1 - np.sign(ymax) * threshold)]
    L_ = X_train.shape[1]
    cand_X, cand_p, n_q = [], [], 0
    while n_q < max_queries:
        for i in range(0, len(parents), batch):
            roots = parents[i:i + batch]
            proot = predict(L.onehot(roots, n_alpha))
            n_q += len(roots)
            nodes, node_root = roots.copy(), np.arange(len(roots))
            while len(nodes) and n_q < max_queries:
                kids = _mutate(nodes, mutation_rate / L_, n_alpha, rng)
                keep = []
                for j, k in enumerate(kids.astype(np.int8)):
                    key = k.tobytes()
                    if key not in seen:  # a new, unseen child per node (else that node rests this round)
                        seen.add(key)
                        keep.append(j)
                if not keep:
                    continue
                kids, kroot = kids[keep], node_root[keep]
                pk = predict(L.onehot(kids, n_alpha))
                n_q += len(kids)
                cand_X.append(kids)
                cand_p.append(pk)
                better = pk >= proot[kroot]
                nodes, node_root = kids[better], kroot[better]
    X = np.concatenate(cand_X)
    p = np.concatenate(cand_p)
    return X[np.argsort(p)[-n_design:]]


# ---- Biswas et al. (2021) MCMC --------------------------------------------------------------------

def _add_mutations(X: np.ndarray, n_mut: np.ndarray, n_alpha: int, rng) -> np.ndarray:
    """Mutate n_mut distinct sites per row to a different nucleotide."""
    X = X.copy()
    n, L_ = X.shape
    order = np.argsort(rng.random((n, L_)), axis=1)
    for i in range(n):
        sites = order[i, :min(int(n_mut[i]), L_)]
        X[i, sites] = (X[i, sites] + rng.integers(1, n_alpha, len(sites))) % n_alpha
    return X


def biswas(predict, seed_idx: np.ndarray, n_design: int, temperature: float, rng: np.random.Generator,
           n_alpha: int = 4, max_mu: float = 2.0, trust_radius: int = 5, n_step: int = 200) -> np.ndarray:
    """One chain per design, initialised at seed + (Poisson(1)+1) mutations; proposals add
    Poisson(mu-1)+1 mutations (mu ~ U(1, max_mu) per chain); Metropolis acceptance
    min(1, exp((f' - f)/T)); proposals beyond the trust radius (Hamming to seed) are rejected."""
    X = _add_mutations(np.tile(seed_idx, (n_design, 1)), rng.poisson(1, n_design) + 1, n_alpha, rng)
    cur = predict(L.onehot(X, n_alpha))
    mu = rng.uniform(1.0, max_mu, n_design)
    for _ in range(n_step):
        prop = _add_mutations(X, rng.poisson(mu - 1) + 1, n_alpha, rng)
        pp = predict(L.onehot(prop, n_alpha))
        acc = np.minimum(np.exp(np.clip((pp - cur) / temperature, -700, 0)), 1.0)
        acc[(prop != seed_idx[None, :]).sum(1) > trust_radius] = 0.0
        ok = rng.random(n_design) < acc
        X[ok], cur[ok] = prop[ok], pp[ok]
    return X
