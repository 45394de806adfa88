"""Adam (Kingma & Ba 2015) with torch.optim.Adam's defaults and its CPU arithmetic, op for op.

Why not torch.optim.Adam itself: its first use (constructing one) imports torch._dynamo, 1.45 CPU-s of a
job's start-up here (measured; a cheap method's train job is ~4 CPU-s), and its per-step bookkeeping is
~0.4 ms of Marg-Var's ~4 ms phi-step. The update below is the one torch.optim.Adam runs on CPU
(`_single_tensor_adam`, amsgrad / weight decay / maximize off), with the same in-place ops in the same
order and a float32 step counter; tests/studies/missing_sm/test_missing_sm_adam.py checks that the
parameters match torch.optim.Adam's bit for bit over many steps.
"""
from __future__ import annotations

import torch


class Adam:
    """Minimal Adam over a fixed list of tensors: `step()` uses each tensor's .grad (skips those without one,
    as torch does), `zero_grad()` sets them to None."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.lr, (self.beta1, self.beta2), self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.state: dict[int, tuple] = {}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        with torch.no_grad():
            self._step()

    def _step(self) -> None:
        lr, beta1, beta2, eps = self.lr, self.beta1, self.beta2, self.eps
        for i, p in enumerate(self.params):
            grad = p.grad
            if grad is None:
                continue
            if i not in self.state:  # torch: a float32 step tensor and zero moments, created lazily
                self.state[i] = (torch.zeros((), dtype=torch.float32), torch.zeros_like(p), torch.zeros_like(p),
                                 torch.empty_like(p))
            step_t, exp_avg, exp_avg_sq, denom = self.state[i]
            step_t += 1
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = step_t.item()
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            # torch: (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps); the same ops into a kept buffer
            torch.sqrt(exp_avg_sq, out=denom).div_(bias_correction2_sqrt).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)
