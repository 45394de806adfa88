"""Learnable linear-spline activations (official `model/linearspline.py` is the specification).

A spline has `num_knots` uniformly spaced knots on [x_min, x_max]; its value is the linear interpolation
of the coefficients, extended linearly outside the range with the first / last segment (the official
autograd function clamps the segment index but not the fraction). `num_activations` independent splines
act on channel groups. A `slope_min` constraint is a projection of the coefficients (clamp the slopes,
re-integrate, keep the mean), applied in every forward, so gradients flow through the projection.
"""
from __future__ import annotations

import torch
from torch import nn


class LinearSpline(nn.Module):
    def __init__(self, num_activations: int, num_knots: int, x_min: float, x_max: float, init,
                 slope_min: float | None = None):
        super().__init__()
        self.num_activations, self.num_knots = int(num_activations), int(num_knots)
        self.x_min, self.x_max = float(x_min), float(x_max)
        self.step = (self.x_max - self.x_min) / (self.num_knots - 1)
        self.slope_min = slope_min
        grid = torch.linspace(self.x_min, self.x_max, self.num_knots).expand(self.num_activations, -1)
        if isinstance(init, (int, float)) and not isinstance(init, bool):
            coeffs = torch.full_like(grid, float(init))
        elif init == "identity":
            coeffs = grid.clone()
        elif init == "gaussian":
            coeffs = torch.exp(-grid ** 2)
        elif init == "zero":
            coeffs = torch.zeros_like(grid)
        else:
            raise ValueError(f"unknown spline init {init!r}")
        self.coefficients = nn.Parameter(coeffs.contiguous())

    def projected(self) -> torch.Tensor:
        cs = self.coefficients
        if self.slope_min is None:
            return cs
        slopes = ((cs[:, 1:] - cs[:, :-1]) / self.step).clamp(min=self.slope_min)
        new = torch.cat([torch.zeros_like(cs[:, :1]), torch.cumsum(slopes, dim=1) * self.step], dim=1)
        return new + (cs - new).mean(dim=1, keepdim=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        c = shape[1]
        if c % self.num_activations:
            raise ValueError("channels must be divisible by the number of activations")
        x = x.reshape(shape[0], self.num_activations, c // self.num_activations, -1)
        xc = x.clamp(self.x_min, self.x_max - self.step)
        left = torch.floor((xc - self.x_min) / self.step)
        frac = (x - self.x_min) / self.step - left  # unclamped: linear extension outside the range
        idx = left.long() + (torch.arange(self.num_activations, device=x.device) * self.num_knots).view(1, -1, 1, 1)
        flat = self.projected().reshape(-1)
        out = flat[idx + 1] * frac + flat[idx] * (1 - frac)
        return out.reshape(shape)
