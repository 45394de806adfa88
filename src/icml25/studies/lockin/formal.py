"""Section 3 of the paper: Bayesian agents with private and aggregated beliefs linked by a trust matrix W.

Each agent i sees o ~ N(mu, sigma_i^2) every step. Its private posterior (flat prior) has precision
p_t = t / sigma_i^2 and mean mu_hat_t (the mean of its own observations). Its aggregated posterior
(mean nu, precision q) folds in the others' aggregated beliefs through W:

    q_{t+1}        = p_{t+1} + W q_t
    nu_{t+1} q_{t+1} = mu_hat_{t+1} p_{t+1} + W (nu_t q_t)

(elementwise products, q_0 = 0). Theorem: the aggregated beliefs lock in to a false value iff rho(W) > 1.
For the human-LLM star (agent 0 the LLM, W[0, j] = lambda1, W[j, 0] = lambda2) rho = sqrt((N-1) l1 l2).

Numerics: above the threshold q grows like rho^t, so q and m = nu q are stored as q~ e^L, m~ e^L with a
shared scalar log-scale L renormalised every step (exact; no overflow for any rho and T).
"""
from __future__ import annotations

import math

import numpy as np


def star_trust(n_agents: int, lambda1: float, lambda2: float) -> np.ndarray:
    """Human-LLM star: agent 0 (LLM) trusts every human with lambda1, every human trusts the LLM with lambda2."""
    W = np.zeros((n_agents, n_agents))
    W[0, 1:] = lambda1
    W[1:, 0] = lambda2
    return W


def star_lambdas(rho2: float, n_agents: int, lambda2: float | None = None) -> tuple[float, float]:
    """(lambda1, lambda2) with (N-1) lambda1 lambda2 = rho2; symmetric (lambda1 = lambda2) unless lambda2 is given."""
    if lambda2 is None:
        lam = math.sqrt(rho2 / (n_agents - 1))
        return lam, lam
    return rho2 / ((n_agents - 1) * lambda2), lambda2


def spectral_radius(W: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(W))))


def checkpoints(T: int, n: int = 24) -> np.ndarray:
    """Log-spaced steps in [1, T] plus T/4, T/2, T-1 and T (the ones the metrics use)."""
    pts = set(np.unique(np.round(np.logspace(0, math.log10(T), n)).astype(int)).tolist())
    pts |= {max(1, T // 4), max(1, T // 2), max(1, T - 1), T}
    return np.array(sorted(p for p in pts if 1 <= p <= T))


def simulate(W, sigma, mu: float, T: int, n_runs: int, rng: np.random.Generator, record=None) -> dict:
    """Run the paper's dynamics for n_runs independent worlds at once (vectorised over runs).

    sigma: (N,) observation noise per agent; np.inf means the agent observes nothing (p = 0).
    Returns nu[k] (n_runs, N) and log_q[k] (N,) at the recorded steps (q does not depend on the data).
    """
    W = np.asarray(W, dtype=float)
    N = W.shape[0]
    prec = 1.0 / np.asarray(sigma, dtype=float) ** 2  # 0 for sigma = inf
    sd = np.where(np.isfinite(sigma), sigma, 0.0)
    record = checkpoints(T) if record is None else np.asarray(record)
    want = set(int(t) for t in record)
    S = np.zeros((n_runs, N))  # running sum of own observations
    qs = np.zeros(N)  # q = qs * e^L
    ms = np.zeros((n_runs, N))  # nu * q = ms * e^L
    L = 0.0
    out_t, out_nu, out_logq = [], [], []
    for t in range(1, T + 1):
        S += mu + sd * rng.standard_normal((n_runs, N))
        scale = math.exp(-L)
        p = t * prec  # private precision after t observations
        qs = p * scale + W @ qs
        ms = (S * prec) * scale + ms @ W.T  # mu_hat * p = S / sigma^2
        c = float(qs.max())
        if c > 0:
            qs, ms, L = qs / c, ms / c, L + math.log(c)
        if t in want:
            with np.errstate(divide="ignore", invalid="ignore"):
                out_t.append(t)
                out_nu.append(ms / qs)
                out_logq.append(np.log(qs) + L)
    return {"t": np.array(out_t), "nu": np.array(out_nu), "log_q": np.array(out_logq)}


def simulate_degroot(W, sigma, mu: float, T: int, n_runs: int, rng: np.random.Generator, record=None) -> dict:
    """Baseline without precision bookkeeping: plain DeGroot averaging of one's own estimate and the
    others' beliefs with the same trust weights, row-normalised: b_i <- (a_i mu_hat_i + sum_j W_ij b_j) / (a_i + sum_j W_ij).
    """
    W = np.asarray(W, dtype=float)
    N = W.shape[0]
    obs = np.isfinite(sigma).astype(float)
    sd = np.where(np.isfinite(sigma), sigma, 0.0)
    denom = obs + W.sum(1)
    record = checkpoints(T) if record is None else np.asarray(record)
    want = set(int(t) for t in record)
    S = np.zeros((n_runs, N))
    b = np.zeros((n_runs, N))
    out_t, out_b = [], []
    for t in range(1, T + 1):
        S += mu + sd * rng.standard_normal((n_runs, N))
        b = (obs * (S / t) + b @ W.T) / denom
        if t in want:
            out_t.append(t)
            out_b.append(b.copy())
    return {"t": np.array(out_t), "nu": np.array(out_b), "log_q": None}


def gaussian_entropy(log_q):
    """Differential entropy (nats) of a Gaussian with precision q = exp(log_q)."""
    return 0.5 * (math.log(2 * math.pi * math.e) - np.asarray(log_q))


def summarise(res: dict, mu: float, T: int, agent: int = 0) -> dict:
    """The metrics of one batch of runs for one agent (the LLM by default)."""
    t = list(res["t"])
    iT, i4, i2, i1 = t.index(T), t.index(max(1, T // 4)), t.index(max(1, T // 2)), t.index(max(1, T - 1))
    nu = res["nu"][:, :, agent]  # (checkpoints, runs)
    err = np.abs(nu - mu)
    rms = lambda k: float(np.sqrt(np.mean(err[k] ** 2)))
    out = {
        "err_T": float(err[iT].mean()),
        "err_ratio": rms(iT) / rms(i4),  # ~0.5 when error ~ 1/sqrt(T)
        "spread_T": float(nu[iT].std(ddof=1)) if nu.shape[1] > 1 else 0.0,
        "drift": float(np.abs(nu[iT] - nu[i2]).mean()),  # belief change over the second half
        "parity_gap": float(np.abs(nu[iT] - nu[i1]).mean()),
        "err_slope": err_slope(res["t"], err, T),
    }
    if res["log_q"] is not None:
        lq = res["log_q"][:, agent]
        out["entropy_T"] = float(gaussian_entropy(lq[iT]))
        out["log_q_over_T"] = float(lq[iT] - math.log(T))
        out["q_growth"] = float((lq[iT] - math.log(T)) - (lq[i4] - math.log(max(1, T // 4))))
        out["calib_z"] = float(np.sqrt(np.mean((nu[iT] - mu) ** 2 * np.exp(lq[iT]))))
    return out


def err_slope(t, err, T: int) -> float:
    """Least-squares slope of log RMS error vs log t over the checkpoints in [T/200, T]:
    -0.5 for 1/sqrt(T) convergence, 0 for a frozen belief (less noisy than a two-point ratio)."""
    t = np.asarray(t, dtype=float)
    keep = t >= max(1.0, T / 200)
    rms = np.sqrt(np.mean(np.asarray(err)[keep] ** 2, axis=1))
    return float(np.polyfit(np.log(t[keep]), np.log(np.maximum(rms, 1e-300)), 1)[0])


def exact_error_rms(W, sigma, T: int, agent: int = 0) -> float:
    """Exact sqrt(E[(nu_T - mu)^2]) of `agent`, derived independently of `simulate`.

    Unrolling the recursion gives nu_T q_T = sum_s [W^(T-s) (S_s / sigma^2)] with S_s = s mu + E_s,
    E_s the running sum of noise; q_T = sum_s [W^(T-s) p_s]. The error is linear in the noise:
    coefficient of eps_{r,j} = (1/sigma_j^2) sum_{s>=r} [W^(T-s)]_{agent,j} / q_T. Only for moderate rho^T.
    """
    W = np.asarray(W, dtype=float)
    sigma = np.asarray(sigma, dtype=float)
    prec = 1.0 / sigma**2
    var_eps = np.where(np.isfinite(sigma), sigma, 0.0) ** 2
    v = np.zeros(W.shape[0])
    v[agent] = 1.0  # row `agent` of W^(T-s), starting at s = T
    cum = np.zeros_like(v)
    q_T, var = 0.0, 0.0
    for s in range(T, 0, -1):
        q_T += float(v @ (s * prec))
        cum += v
        var += float(((prec * cum) ** 2) @ var_eps)  # contribution of eps_s
        v = v @ W
    return math.sqrt(var) / q_T


def curves(res: dict, mu: float, agent: int = 0) -> list[dict]:
    rows = []
    for k, t in enumerate(res["t"]):
        err = np.abs(res["nu"][k, :, agent] - mu)
        rows.append({"metric": "err_T", "step": int(t), "value": float(err.mean())})
        if res["log_q"] is not None:
            rows.append({"metric": "entropy_T", "step": int(t), "value": float(gaussian_entropy(res["log_q"][k, agent]))})
    return rows
