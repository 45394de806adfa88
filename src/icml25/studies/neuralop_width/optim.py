"""Training arms: full-batch gradient descent with one fixed step size (the paper's setting) and Adam.

The loss is the paper's empirical operator loss L = (1/n) sum_i (1/q_i) sum_j (G_theta(u_i)(y_ij) - G(u_i)(y_ij))^2
(every function has the same q query points here, so it is the mean squared error over all (i, j)).
"""
from __future__ import annotations

import time

import numpy as np
import torch


def predictor(model, kind: str, arrays: dict):
    """A closure returning the (n, q) predictions of `model` on one split."""
    u = torch.as_tensor(arrays["u"])
    if kind == "don":
        y = torch.as_tensor(arrays["y"])
        return lambda: model(u, y)
    return lambda: model(u)


def operator_loss(pred, target):
    return ((pred - target) ** 2).mean(dim=1).mean()


@torch.no_grad()
def gd_step(params, lr: float) -> None:
    """theta <- theta - lr * grad L: no momentum, no weight decay, no clipping."""
    for p in params:
        if p.grad is not None:
            p.sub_(lr * p.grad)


def relative_l2(pred, target) -> float:
    """mean over functions of ||pred_i - s_i|| / ||s_i||."""
    num = torch.linalg.vector_norm(pred - target, dim=1)
    den = torch.linalg.vector_norm(target, dim=1).clamp_min(1e-12)
    return float((num / den).mean())


def train(model, kind: str, train_arrays: dict, arm: str, lr: float, steps: int, threshold: float,
          log_every: int = 10) -> dict:
    """Full-batch training for `steps` updates. Returns the loss curve (logged every `log_every` steps,
    plus the last), the final training loss, and the first step whose loss is <= threshold (steps if never).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    target = torch.as_tensor(train_arrays["s"])
    predict = predictor(model, kind, train_arrays)
    opt = torch.optim.Adam(params, lr=lr) if arm == "adam" else None
    if arm not in ("gd", "adam"):
        raise ValueError(f"unknown training arm {arm!r}")
    curve, hit, diverged = [], None, False
    t0 = time.perf_counter()
    for step in range(steps):
        loss = operator_loss(predict(), target)
        value = float(loss.detach())
        if not np.isfinite(value):
            diverged = True
            curve.append((step, float("nan")))
            break
        if hit is None and value <= threshold:
            hit = step
        if step % log_every == 0:
            curve.append((step, value))
        for p in params:
            p.grad = None
        loss.backward()
        if opt is None:
            gd_step(params, lr)
        else:
            opt.step()
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        final = float(operator_loss(predict(), target)) if not diverged else float("nan")
    if hit is None and np.isfinite(final) and final <= threshold:
        hit = steps
    curve.append((steps, final))
    return {"curve": curve, "final_loss": final, "steps_to_threshold": steps if hit is None else hit,
            "reached": float(hit is not None), "diverged": float(diverged), "seconds": seconds}


def time_steps(model, kind: str, arrays: dict, lr: float, steps: int) -> float:
    """Median wall seconds of one Adam training step (forward, backward, update) of `model`."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    target = torch.as_tensor(arrays["s"])
    predict = predictor(model, kind, arrays)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        operator_loss(predict(), target).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
