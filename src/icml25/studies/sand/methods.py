"""Methods of the SAND study: SAND (one-shot, no retraining) and five references.

``run_method(method, data, task, k, hp, seed) -> dict`` with keys
``metrics`` (name -> float), ``curves`` (list of {'step', 'metric', 'value'}),
``selected`` (sorted feature indices), ``gains`` (SAND's trained gains before masking, else None).

Methods
-------
sand      SAND layer -> MLP, trained ``epochs``; keep top-k gains (others zeroed, renormalised so
          sum a^2 = k); evaluate the same network, no retraining.
stg       STG gates (own implementation, see baselines.py), lambda by bisection on log lambda so
          that about k gates open; top-k mu; retrain a fresh MLP on the k features for
          ``retrain_epochs`` ("STG (lambda tuned to k) + retrain": our protocol, not the paper's).
stg_paper STG as the paper's SAND-vs-STG comparison runs it (official SANDvsSTG/run.py): one
          training at a fixed lambda (``stg_paper_lambda``, the stg package's mean-penalty scale),
          no k constraint; the gated network itself is scored (no retraining). ``selected`` = the
          open gates (mu_i > 0), however many lambda leaves open.
lassonet  LassoNet path (``lassonet`` package), first model with <= k active features (filled
          up by path importance); retrain.
anova     ANOVA-F (f_classif / f_regression) top-k; retrain.
random    seeded random k features; retrain.
all       MLP on all features (reference, no selection), ``epochs`` epochs.

Hyper-parameters (``hp`` keys; missing keys take these defaults)
-----------------------------------------------------------------
epochs                    30      SAND training epochs; also the default for the others below
batch_size                64
lr                        1e-3    Adam learning rate (all networks)
sigma                     1.5     SAND noise scale
hidden                    None    MLP hidden width; None -> max(16, n_features // 3) of the FULL
                                  feature count (retrained nets keep this width, input = k)
retrain_epochs            None    epochs for retraining baselines and for 'all'; None -> epochs
sand_rank                 'gain'  'gain' (paper and the current official code: top-k |a_i|) or
                                  'gain_x_w1' (|a_i| * ||W1[:, i]||_2, an earlier official version)
stg_sigma                 0.5     STG gate noise std
stg_lambda_lo             1e-3    bisection range of lambda (penalty lambda * sum_i Phi(mu_i/sigma))
stg_lambda_hi             1.0
stg_trials                3       number of STG trainings in the bisection (stops early on == k)
stg_epochs                None    epochs of each STG trial; None -> epochs
stg_gate_lr               None    Adam lr of the gate parameters mu; None -> lr
stg_paper_lambda          1.9     stg_paper's fixed lambda on the stg package's scale (lambda * mean_i
                                  Phi(mu_i/sigma)); 1.9 is the official comparison's Madelon value
                                  (SANDvsSTG/hyperparams.py LAMBDA['madelon'])
stg_paper_mu_init_std     0.01    stg_paper: mu init 0.5 + this * N(0, 1) (the stg package's init)
stg_paper_weight_decay    1e-3    stg_paper: Adam weight decay on all parameters (the package default)
lassonet_hidden           None    None -> same hidden width as the MLP
lassonet_n_iters          None    (initial dense epochs, max epochs per lambda); None -> (epochs, 5)
lassonet_patience         (10, 2) early-stopping patience (dense, per lambda)
lassonet_path_multiplier  1.4     lambda growth factor along the path
lassonet_lambda_start     10.0    first lambda of the path ('auto' is LassoNet's own estimate, which
                                  costs ~5 CPU-s of prox searches per call -- avoided by default)
lassonet_M                10.0    hierarchy coefficient
lassonet_batch_size       256     None = full batch

Metrics: ``test_metric`` / ``val_metric`` (accuracy for clf, MAE for reg, in standardised y
units for diabetes), ``epochs_total`` (all epochs incl. selection + retraining; for STG the sum
over trials, for LassoNet the epochs actually run along the path incl. the dense start),
``retrain_epochs`` (0 for sand, stg_paper and all), ``cpu_seconds`` (time.process_time delta -- counts all
threads of the process; one-time per-process imports are excluded), ``n_selected``; sand: ``gain_polarisation`` (share of a_i within 0.1
of 0 or 1), ``n_gain_gt_half`` (#a_i > 0.5), ``test_metric_unmasked`` (before top-k masking);
if ``data['relevant']`` is non-empty: ``recall_relevant`` for every method except 'all'.
Method-specific extras: stg_lambda, stg_n_open, stg_trials; lassonet_path_len,
lassonet_n_active, lassonet_lambda.

Deterministic given ``seed`` (torch.manual_seed + numpy Generator); the caller should fix the
torch thread count (e.g. torch.set_num_threads(1)) for bit-reproducibility and fair timing.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from . import baselines as B
from .layer import SANDLayer
from .mlp import MLP, as_tensors, default_hidden, evaluate, fit, n_outputs

METHODS = ["sand", "stg", "stg_paper", "lassonet", "anova", "random", "all"]

DEFAULT_HP: dict[str, Any] = {
    "epochs": 30,
    "batch_size": 64,
    "lr": 1e-3,
    "sigma": 1.5,
    "hidden": None,
    "retrain_epochs": None,
    "sand_rank": "gain",
    "stg_sigma": 0.5,
    "stg_lambda_lo": 1e-3,
    "stg_lambda_hi": 1.0,
    "stg_trials": 3,
    "stg_epochs": None,
    "stg_gate_lr": None,
    "stg_paper_lambda": 1.9,
    "stg_paper_mu_init_std": 0.01,
    "stg_paper_weight_decay": 1e-3,
    "lassonet_hidden": None,
    "lassonet_n_iters": None,
    "lassonet_patience": (10, 2),
    "lassonet_path_multiplier": 1.4,
    "lassonet_lambda_start": 10.0,
    "lassonet_M": 10.0,
    "lassonet_batch_size": 256,
}


_WARM: set[str] = set()


def _warmup(method: str) -> None:
    """One-time per-process imports (torch optimiser machinery, sklearn, lassonet) so that
    ``cpu_seconds`` measures the method, not lazy imports."""
    if "torch" not in _WARM:
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])
        _WARM.add("torch")
    if method == "lassonet" and method not in _WARM:
        import lassonet  # noqa: F401
        _WARM.add(method)
    if method == "anova" and method not in _WARM:
        import sklearn.feature_selection  # noqa: F401
        _WARM.add(method)


def _seed_all(seed: int, salt: int = 0) -> None:
    torch.manual_seed((int(seed) * 1_000_003 + salt) % (2**63 - 1))


def _train_eval_subset(data: dict, task: str, cols: np.ndarray | None, hidden: int, epochs: int,
                       hp: dict, curves: list, prefix: str = "") -> tuple[float, float]:
    Xtr, Xva, Xte = data["X_train"], data["X_val"], data["X_test"]
    if cols is not None:
        Xtr, Xva, Xte = Xtr[:, cols], Xva[:, cols], Xte[:, cols]
    tr = as_tensors(Xtr, data["y_train"], task)
    va = as_tensors(Xva, data["y_val"], task)
    te = as_tensors(Xte, data["y_test"], task)
    model = MLP(tr[0].shape[1], hidden, n_outputs(task, data["y_train"]))
    fit(model, *tr, *va, task, epochs, hp["batch_size"], hp["lr"], prefix=prefix, curves=curves)
    return evaluate(model, *va, task), evaluate(model, *te, task)


def run_method(method: str, data: dict[str, np.ndarray], task: str, k: int, hp: dict | None, seed: int) -> dict:
    if method not in METHODS:
        raise KeyError(f"unknown method {method!r}; known {METHODS}")
    hp = {**DEFAULT_HP, **(hp or {})}
    _warmup(method)
    t0 = time.process_time()
    n = int(data["X_train"].shape[1])
    k = int(k)
    hidden = default_hidden(n, hp.get("hidden"))
    epochs = int(hp["epochs"])
    retrain = int(hp.get("retrain_epochs") or epochs)
    curves: list[dict] = []
    metrics: dict[str, float] = {}
    gains = None
    _seed_all(seed, 1)

    if method == "sand":
        tr = as_tensors(data["X_train"], data["y_train"], task)
        va = as_tensors(data["X_val"], data["y_val"], task)
        te = as_tensors(data["X_test"], data["y_test"], task)
        layer = SANDLayer(n, k, sigma=float(hp["sigma"]))
        model = MLP(n, hidden, n_outputs(task, data["y_train"]), front=layer)
        fit(model, *tr, *va, task, epochs, hp["batch_size"], hp["lr"], curves=curves)
        a = layer.gains().numpy().astype(np.float64)
        gains = [float(v) for v in a]
        metrics["test_metric_unmasked"] = evaluate(model, *te, task)
        if hp["sand_rank"] == "gain_x_w1":
            scores = layer.gains() * model.fc1.weight.detach().norm(dim=0)
        elif hp["sand_rank"] == "gain":
            scores = None
        else:
            raise ValueError(f"sand_rank must be 'gain' or 'gain_x_w1', got {hp['sand_rank']!r}")
        sel = layer.select_topk(k, scores=scores).numpy().astype(np.int64)
        metrics["val_metric"] = evaluate(model, *va, task)
        metrics["test_metric"] = evaluate(model, *te, task)
        metrics["gain_polarisation"] = float(np.mean((a < 0.1) | (np.abs(a - 1.0) < 0.1)))
        metrics["n_gain_gt_half"] = float(np.sum(a > 0.5))
        metrics["epochs_total"] = float(epochs)
        metrics["retrain_epochs"] = 0.0
    elif method == "stg_paper":
        va = as_tensors(data["X_val"], data["y_val"], task)
        te = as_tensors(data["X_test"], data["y_test"], task)
        gate, model, info = B.stg_paper_train(data, task, hidden, hp, curves)
        # no k: the features the gated network uses are its open gates (eval gate clip(mu, 0, 1) > 0)
        sel = np.flatnonzero(gate.mu.detach().numpy() > 0).astype(np.int64)
        for key, v in info.items():
            if key != "epochs":
                metrics[key] = float(v)
        metrics["val_metric"] = evaluate(model, *va, task)
        metrics["test_metric"] = evaluate(model, *te, task)
        metrics["epochs_total"] = float(info["epochs"])
        metrics["retrain_epochs"] = 0.0
    elif method == "all":
        sel = np.arange(n, dtype=np.int64)
        metrics["val_metric"], metrics["test_metric"] = _train_eval_subset(
            data, task, None, hidden, retrain, hp, curves)
        metrics["epochs_total"] = float(retrain)
        metrics["retrain_epochs"] = 0.0
    else:
        if method == "stg":
            sel, info = B.select_stg(data, task, k, hidden, hp, curves)
        elif method == "lassonet":
            sel, info = B.select_lassonet(data, task, k, hidden, hp, seed)
        elif method == "anova":
            sel, info = B.select_anova(data, task, k)
        else:
            sel, info = B.select_random(n, k, seed)
        for key, v in info.items():
            if key != "epochs":
                metrics[key] = float(v)
        _seed_all(seed, 2)  # same retraining init stream for every baseline
        metrics["val_metric"], metrics["test_metric"] = _train_eval_subset(
            data, task, sel, hidden, retrain, hp, curves)
        metrics["epochs_total"] = float(info["epochs"] + retrain)
        metrics["retrain_epochs"] = float(retrain)

    metrics["n_selected"] = float(len(sel))
    rel = np.asarray(data.get("relevant", np.zeros(0)), dtype=np.int64).ravel()
    if rel.size and method != "all":
        metrics["recall_relevant"] = float(len(set(sel.tolist()) & set(rel.tolist())) / rel.size)
    metrics["cpu_seconds"] = float(time.process_time() - t0)
    return {"metrics": metrics, "curves": curves, "selected": [int(i) for i in sel], "gains": gains}
