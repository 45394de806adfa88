"""One-hidden-layer MLP and a minimal, deterministic training loop (Adam, mini-batches).

Classification: cross-entropy loss, metric = accuracy.  Regression: L1 (MAE) loss, metric = MAE.
Batches are drawn with ``torch.randperm`` from the global torch RNG (seed it beforehand); the
last partial batch is kept.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn


def default_hidden(n_features: int, hidden: int | None = None) -> int:
    return int(hidden) if hidden else max(16, n_features // 3)


class MLP(nn.Module):
    """[front] -> Linear(n_in, hidden) -> ReLU -> Linear(hidden, n_out).

    ``front`` is an optional feature-selection layer (SANDLayer, STGGate) applied to x first.
    """

    def __init__(self, n_in: int, hidden: int, n_out: int, front: nn.Module | None = None):
        super().__init__()
        self.front = front
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.front is not None:
            x = self.front(x)
        return self.fc2(torch.relu(self.fc1(x)))


def n_outputs(task: str, y: np.ndarray) -> int:
    return int(np.max(y)) + 1 if task == "clf" else 1


def loss_fn(task: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if task == "clf":
        return nn.functional.cross_entropy(out, y)
    return (out.squeeze(-1) - y).abs().mean()


@torch.no_grad()
def evaluate(model: nn.Module, X: torch.Tensor, y: torch.Tensor, task: str) -> float:
    """Accuracy (clf) or MAE (reg) in eval mode."""
    was = model.training
    model.eval()
    out = model(X)
    model.train(was)
    if task == "clf":
        return float((out.argmax(-1) == y).float().mean())
    return float((out.squeeze(-1) - y).abs().mean())


def as_tensors(X: np.ndarray, y: np.ndarray, task: str) -> tuple[torch.Tensor, torch.Tensor]:
    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32)
    yt = torch.as_tensor(np.ascontiguousarray(y), dtype=torch.long if task == "clf" else torch.float32)
    return Xt, yt


def make_adam(model: nn.Module, lr: float, param_lrs: dict | None = None,
              weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """Adam (fused CPU kernel when available -- same maths, faster).  ``param_lrs`` maps
    parameter objects to their own learning rate (e.g. STG gates); ``weight_decay`` is Adam's L2
    term on every other parameter (0: none; the ``param_lrs`` ones get none)."""
    param_lrs = param_lrs or {}
    special = {id(p) for p in param_lrs}
    groups = [{"params": [p for p in model.parameters() if id(p) not in special], "lr": lr,
               "weight_decay": weight_decay}]
    groups += [{"params": [p], "lr": float(v), "weight_decay": 0.0} for p, v in param_lrs.items()]
    try:
        return torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay)


def _plain_fused(opt: torch.optim.Optimizer) -> bool:
    """A fused torch Adam with none of the options adam_step leaves to torch's own step."""
    d = opt.defaults
    return (isinstance(opt, torch.optim.Adam) and bool(d.get("fused")) and hasattr(torch, "_fused_adam_")
            and not any(d.get(key) for key in ("amsgrad", "maximize", "capturable", "differentiable",
                                               "decoupled_weight_decay")))


def adam_step(opt: torch.optim.Optimizer) -> None:
    """``opt.step(); opt.zero_grad(set_to_none=True)`` for a fused Adam, calling the same kernel
    (``torch._fused_adam_``, after the same ``step += 1``) with the same state, minus the optimiser's
    per-call wrapper (hooks, profiler ranges, device grouping): that wrapper cost ~50 us a step, a
    quarter of a step on the small MLPs here. Bit-identical to torch's step (tested); any other
    optimiser, or a torch without the kernel, takes torch's own step."""
    if not _plain_fused(opt):
        opt.step()
        opt.zero_grad(set_to_none=True)
        return
    for group in opt.param_groups:
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            continue
        states = []
        for p in params:
            st = opt.state[p]
            if not st:  # as torch's _init_group for a fused Adam: a float32 step, zero moments
                st["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            states.append(st)
        steps = [st["step"] for st in states]
        beta1, beta2 = group["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(params, [p.grad for p in params], [st["exp_avg"] for st in states],
                           [st["exp_avg_sq"] for st in states], [], steps, amsgrad=False, lr=group["lr"],
                           beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                           maximize=False, grad_scale=None, found_inf=None)
        for p in params:
            p.grad = None


def fit(model: nn.Module, Xtr: torch.Tensor, ytr: torch.Tensor, Xva: torch.Tensor, yva: torch.Tensor,
        task: str, epochs: int, batch_size: int = 64, lr: float = 1e-3,
        penalty: Callable[[], torch.Tensor] | None = None, prefix: str = "",
        curves: list | None = None, param_lrs: dict | None = None, weight_decay: float = 0.0) -> list[dict]:
    """Train ``model`` in place for ``epochs`` epochs; append per-epoch curves and return them.

    Curves: ``{prefix}train_loss`` (mean batch loss incl. penalty) and ``{prefix}val_metric``,
    step = epoch (1-based).
    """
    curves = [] if curves is None else curves
    opt = make_adam(model, lr, param_lrs, weight_decay)
    n = Xtr.shape[0]
    for ep in range(1, int(epochs) + 1):
        model.train()
        perm = torch.randperm(n)
        tot, nb = 0.0, 0
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            # index_select: the same rows as Xtr[idx], without advanced indexing's per-call overhead
            # (about 40 us a batch on Fashion's 784 columns)
            loss = loss_fn(task, model(Xtr.index_select(0, idx)), ytr.index_select(0, idx))
            if penalty is not None:
                loss = loss + penalty()
            loss.backward()
            adam_step(opt)  # step, then grads to None (the old zero_grad before backward)
            tot += float(loss.detach())
            nb += 1
        curves.append({"step": ep, "metric": f"{prefix}train_loss", "value": tot / max(nb, 1)})
        curves.append({"step": ep, "metric": f"{prefix}val_metric", "value": evaluate(model, Xva, yva, task)})
    return curves
