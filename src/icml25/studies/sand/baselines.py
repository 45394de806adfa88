"""Feature-selection baselines: STG (own implementation), LassoNet (package), ANOVA-F, random-k.

Each selector returns ``(selected_indices (sorted np.int64 array of length k), info dict)``;
``info['epochs']`` counts the training epochs spent on selection.

STG (Yamada et al., ICML 2020), implemented here (the ``stg`` PyPI package does run on current
torch, but it hard-codes a different parameterisation -- mu init 0.01*N(0,1) shifted by +0.5,
penalty *mean* instead of sum, weight decay 1e-3, its own truncated-normal init -- and its own
training loop; we implement the gate exactly as specified so costs/epochs are comparable):

    gate z_i = clip(mu_i + eps_i, 0, 1),  eps_i ~ N(0, sigma_stg^2) per batch in training,
    z_i = clip(mu_i, 0, 1) in eval;  mu init 0.5;
    penalty = lambda * sum_i Phi(mu_i / sigma_stg)   (Gaussian CDF = P(gate > 0)).

lambda is chosen by a bisection on log(lambda) (each trial a full STG training) so that the
number of open gates (mu_i > 0) is as close to k as possible; the final selection is the top-k
mu of the closest trial (``select_stg``; the study retrains a fresh MLP on it).

``stg_paper`` is the protocol of the paper's SAND-vs-STG comparison (official SAND repository,
``SANDvsSTG/run.py`` with the ``stg`` package): one STG training at a *fixed* lambda, no k
constraint, and the gated network itself is scored (eval gates clip(mu, 0, 1)), no retraining.
To match that package we use its penalty scale -- lambda * *mean*_i Phi(mu_i/sigma), i.e.
``penalty(lam / n)`` here --, its mu init 0.5 + 0.01*N(0, 1) (our mu is the package's mu + 0.5) and
its Adam weight decay 1e-3 on every parameter: on the network as Adam's L2 term, on the gates as the
same L2 term pulling the package's mu to 0, i.e. ours to 0.5 (wd/2 * sum (mu - 0.5)^2 added to the
loss); the gate and loop are ours (``stg_paper_train``).
"""
from __future__ import annotations

import contextlib
import io
import math
import warnings

import numpy as np
import torch
from torch import nn

from .mlp import MLP, as_tensors, fit, n_outputs


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
def topk_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores (ties broken towards the lower index), sorted."""
    s = np.asarray(scores, dtype=np.float64)
    s = np.where(np.isnan(s), -np.inf, s)
    order = np.lexsort((np.arange(len(s)), -s))
    return np.sort(order[:k]).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# STG
# ----------------------------------------------------------------------------------------------
class STGGate(nn.Module):
    def __init__(self, n: int, sigma: float = 0.5, mu_init: float = 0.5, mu_init_std: float = 0.0):
        super().__init__()
        self.sigma = float(sigma)
        mu = torch.full((n,), float(mu_init))
        if mu_init_std:
            mu = mu + float(mu_init_std) * torch.randn(n)
        self.mu = nn.Parameter(mu)

    def gates(self) -> torch.Tensor:
        if self.training:
            return (self.mu + self.sigma * torch.randn_like(self.mu)).clamp(0.0, 1.0)
        return self.mu.clamp(0.0, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gates()

    def penalty(self, lam: float) -> torch.Tensor:
        # Phi(mu/sigma) = P(mu + eps > 0): expected number of open gates
        return lam * 0.5 * (1.0 + torch.erf(self.mu / (self.sigma * math.sqrt(2.0)))).sum()

    @torch.no_grad()
    def n_open(self) -> int:
        return int((self.mu > 0).sum())


def stg_train(data: dict, task: str, lam: float, hidden: int, epochs: int, batch_size: int, lr: float,
              sigma: float, curves: list | None = None, prefix: str = "stg/",
              gate_lr: float | None = None, return_model: bool = False, mu_init_std: float = 0.0,
              weight_decay: float = 0.0):
    """One STG training (penalty lam * sum_i Phi(mu_i/sigma)); the gate, or (gate, model) if return_model.

    ``weight_decay`` > 0: Adam L2 on the network weights, and on the gates the stg package's decay of its
    mu (= ours - 0.5) towards 0: weight_decay/2 * sum (mu - 0.5)^2 in the loss (the same gradient)."""
    Xtr, ytr = as_tensors(data["X_train"], data["y_train"], task)
    Xva, yva = as_tensors(data["X_val"], data["y_val"], task)
    n = Xtr.shape[1]
    gate = STGGate(n, sigma=sigma, mu_init_std=mu_init_std)
    model = MLP(n, hidden, n_outputs(task, data["y_train"]), front=gate)
    if weight_decay:
        wd = float(weight_decay)
        penalty = lambda: gate.penalty(lam) + 0.5 * wd * ((gate.mu - 0.5) ** 2).sum()  # noqa: E731
        param_lrs = {gate.mu: gate_lr or lr}  # its own group: no Adam decay towards 0 on mu
    else:
        penalty = lambda: gate.penalty(lam)  # noqa: E731
        param_lrs = {gate.mu: gate_lr} if gate_lr else None
    fit(model, Xtr, ytr, Xva, yva, task, epochs, batch_size, lr, penalty=penalty,
        prefix=prefix, curves=curves, param_lrs=param_lrs, weight_decay=weight_decay)
    return (gate, model) if return_model else gate


def stg_paper_train(data: dict, task: str, hidden: int, hp: dict, curves: list | None = None):
    """The paper's STG protocol: one training at the fixed ``stg_paper_lambda`` (the stg package's mean
    penalty scale), no k constraint. Returns (gate, model, info); the caller scores ``model`` itself."""
    n = int(data["X_train"].shape[1])
    lam_mean = float(hp["stg_paper_lambda"])
    epochs = int(hp.get("stg_epochs") or hp["epochs"])
    gate, model = stg_train(data, task, lam_mean / n, hidden, epochs, hp["batch_size"], hp["lr"], hp["stg_sigma"],
                            curves=curves, prefix="", return_model=True, gate_lr=hp.get("stg_gate_lr"),
                            mu_init_std=float(hp["stg_paper_mu_init_std"]),
                            weight_decay=float(hp["stg_paper_weight_decay"]))
    info = {"epochs": epochs, "stg_lambda": lam_mean, "stg_n_open": gate.n_open(), "stg_trials": 1}
    return gate, model, info


def select_stg(data: dict, task: str, k: int, hidden: int, hp: dict, curves: list) -> tuple[np.ndarray, dict]:
    """Bisection on log10(lambda) over [stg_lambda_lo, stg_lambda_hi] with stg_trials trainings."""
    epochs = int(hp.get("stg_epochs") or hp["epochs"])
    lo, hi = math.log10(hp["stg_lambda_lo"]), math.log10(hp["stg_lambda_hi"])
    trials = []
    for t in range(int(hp["stg_trials"])):
        loglam = 0.5 * (lo + hi)
        lam = 10.0 ** loglam
        gate = stg_train(data, task, lam, hidden, epochs, hp["batch_size"], hp["lr"], hp["stg_sigma"],
                         curves=curves, prefix=f"stg_trial{t}/", gate_lr=hp.get("stg_gate_lr"))
        n_open = gate.n_open()
        trials.append({"lambda": lam, "n_open": n_open, "mu": gate.mu.detach().numpy().copy()})
        if n_open > k:
            lo = loglam  # too many open gates -> stronger penalty
        elif n_open < k:
            hi = loglam
        else:
            break
    # closest open count; ties -> the larger lambda (sparser, more confident)
    best = min(trials, key=lambda r: (abs(r["n_open"] - k), -r["lambda"]))
    sel = topk_indices(best["mu"], k)
    info = {"epochs": epochs * len(trials), "stg_lambda": best["lambda"], "stg_n_open": best["n_open"],
            "stg_trials": len(trials)}
    return sel, info


# ----------------------------------------------------------------------------------------------
# LassoNet
# ----------------------------------------------------------------------------------------------
class _StopPath(Exception):
    pass


def select_lassonet(data: dict, task: str, k: int, hidden: int, hp: dict, seed: int) -> tuple[np.ndarray, dict]:
    """First model on the LassoNet path with <= k active features; if it has fewer than k, fill
    up by the path's importance ranking (the lambda at which a feature dropped out, later = more
    important; ties broken by the |skip weight| of the model just before it dropped)."""
    from lassonet import LassoNetClassifier, LassoNetRegressor

    cls = LassoNetClassifier if task == "clf" else LassoNetRegressor
    n_iters = hp.get("lassonet_n_iters") or (int(hp["epochs"]), 5)
    model = cls(hidden_dims=(int(hp.get("lassonet_hidden") or hidden),),
                path_multiplier=float(hp["lassonet_path_multiplier"]),
                lambda_start=(hp["lassonet_lambda_start"] if hp["lassonet_lambda_start"] == "auto"
                              else float(hp["lassonet_lambda_start"])), M=float(hp["lassonet_M"]),
                n_iters=tuple(int(v) for v in n_iters), patience=tuple(int(v) for v in hp["lassonet_patience"]),
                batch_size=hp.get("lassonet_batch_size"), verbose=0, random_state=seed, torch_seed=seed,
                device=torch.device("cpu"))
    n = data["X_train"].shape[1]
    drop_lambda = np.full(n, np.inf)
    tie = np.zeros(n)
    rec = {"hist": [], "prev_sel": np.ones(n, bool), "prev_skip": np.zeros(n)}

    def callback(m, hist):
        rec["hist"] = hist
        sel = hist[-1].selected.numpy().astype(bool)
        gone = rec["prev_sel"] & ~sel
        if len(hist) > 1:
            drop_lambda[gone] = hist[-1].lambda_
            tie[gone] = rec["prev_skip"][gone]
        rec["prev_sel"] = sel
        rec["prev_skip"] = m.model.skip.weight.detach().abs().sum(0).numpy().copy()
        if len(hist) > 1 and sel.sum() <= k:
            raise _StopPath

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            model.path(data["X_train"], data["y_train"], X_val=data["X_val"], y_val=data["y_val"],
                       callback=callback, return_state_dicts=False)
        except _StopPath:
            pass
    hist = rec["hist"]
    final = rec["prev_sel"]
    # ranking: still-active features first (by |skip| weight), then dropped ones by drop lambda desc
    alive = np.flatnonzero(final)
    alive = alive[np.lexsort((alive, -rec["prev_skip"][alive]))]
    dead = np.flatnonzero(~final)
    dead = dead[np.lexsort((dead, -tie[dead], -drop_lambda[dead]))]
    order = np.concatenate([alive, dead])
    sel = np.sort(order[:k]).astype(np.int64)
    epochs = int(sum(h.n_iters for h in hist))
    info = {"epochs": epochs, "lassonet_path_len": len(hist), "lassonet_n_active": int(final.sum()),
            "lassonet_lambda": float(hist[-1].lambda_) if hist else float("nan")}
    return sel, info


# ----------------------------------------------------------------------------------------------
# ANOVA-F and random
# ----------------------------------------------------------------------------------------------
def select_anova(data: dict, task: str, k: int) -> tuple[np.ndarray, dict]:
    from sklearn.feature_selection import f_classif, f_regression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = (f_classif if task == "clf" else f_regression)(data["X_train"], data["y_train"])[0]
    f = np.where(np.isnan(f), -np.inf, f)
    # same rule as sklearn SelectKBest: stable argsort, take the last k
    sel = np.sort(np.argsort(f, kind="mergesort")[-k:]).astype(np.int64)
    return sel, {"epochs": 0}


def select_random(n: int, k: int, seed: int) -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng([int(seed), 0xA11D])
    return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64), {"epochs": 0}
