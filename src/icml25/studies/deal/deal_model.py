"""DEAL: the fixed point of weighted-Tikhonov problems with an attention mask (official `deal.py`).

    x_{k+1} = argmin_x 1/2 ||Hx - y||^2 + lambda/2 sum_c ||m_c(x_k) * (W_c x)||^2
            <=> (H^T H + lambda W^T M_k^2 W) x = H^T y,   solved by CG warm-started at x_k,

with the system divided by (1 + lambda) as in the official code (it changes the CG residual scale, not
the solution). The mask is m(x) = clip(phi3(s(sigma) |M3 phi2(|M2 phi1(|M1 x|)|)|), 0.01, 1); lambda(sigma)
and s(sigma) = exp(spline(sigma)) / sigma are learned splines of the noise level (0-255 units).

Training (denoising, H = I; `denoise(..., train=True)`): the fixed point without gradients, one more CG
solve, then one differentiable step c = y - lambda L^T L x* (L = M(x*) W, x* detached) whose incoming
gradient is replaced by the solution of the adjoint system (I + lambda L^T L) g = grad (a backward hook):
implicit, Jacobian-free differentiation of the fixed point, as in the official code (the dependence of
the mask on x* is not differentiated).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch
from torch import nn

from .filters import MultiConv2d
from .splines import LinearSpline

Op = Callable[[torch.Tensor], torch.Tensor]
_ID: Op = lambda z: z


def batch_dot(a, b):
    return (a * b).sum(dim=(1, 2, 3), keepdim=True)


class DEAL(nn.Module):
    def __init__(self, channels=(1, 4, 8, 128), kernel: int = 9, attention: bool = True, sn_size: int = 256):
        super().__init__()
        self.channels, self.kernel, self.attention = list(channels), int(kernel), bool(attention)
        c = self.last_c = self.channels[-1]
        self.W1 = MultiConv2d(self.channels, self.kernel, sn_size)
        if self.attention:
            self.M1 = MultiConv2d(self.channels, self.kernel, sn_size)
            self.M2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.M3 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.spline1 = LinearSpline(1, 31, 0, 3, "identity", slope_min=0)
            self.spline2 = LinearSpline(1, 31, 0, 3, "identity", slope_min=0)
            self.spline3 = LinearSpline(1, 31, 0, 3, "gaussian")
            self.spline_scaling = LinearSpline(c, 14, -1, 51, 3.0)
        self.spline_lambda = LinearSpline(1, 53, -1, 51, "identity")
        self.mask: torch.Tensor | float = 1.0
        self.lmbda: torch.Tensor | None = None
        self.last_cg_iters = 0

    # ---- noise-level dependent parameters -----------------------------------------------------------
    def set_sigma(self, sigma: torch.Tensor) -> None:
        """sigma: (B, 1, 1, 1) in 0-255 units -> lambda(sigma) and the mask scaling s(sigma)."""
        self.lmbda = self.spline_lambda(sigma)
        if self.attention:
            s = sigma.expand(sigma.shape[0], self.last_c, 1, 1)
            self.scaling = torch.exp(self.spline_scaling(s)) / (s + 1e-5)

    def cal_mask(self, x: torch.Tensor) -> torch.Tensor | float:
        """m(x_k): the attention mask of the current iterate (1 everywhere without attention)."""
        if not self.attention:
            self.mask = 1.0
            return self.mask
        h = self.M2(self.spline1(torch.abs(self.M1(x))))
        h = self.M3(self.spline2(torch.abs(h)))
        self.mask = torch.clip(self.spline3(self.scaling * torch.abs(h)), 1e-2, 1.0)
        return self.mask

    # ---- the linear system -----------------------------------------------------------------------------
    def L(self, x, mask=None):
        return self.W1(x) * (self.mask if mask is None else mask)

    def Lt(self, z, mask=None):
        return self.W1.transpose(z * (self.mask if mask is None else mask))

    def system(self, x, H: Op = _ID, Ht: Op = _ID, mask=None, lmbda=None):
        """(H^T H + lambda W^T M^2 W) x / (1 + lambda)."""
        lam = self.lmbda if lmbda is None else lmbda
        return (Ht(H(x)) + lam * self.Lt(self.L(x, mask), mask)) / (1 + lam)

    def cg(self, b, x0, max_iter: int, eps: float, H: Op = _ID, Ht: Op = _ID, mask=None, lmbda=None,
           relative: bool = False):
        """Solve (H^T H + lambda W^T M^2 W) x = b by CG from x0. As the official `cg`: per image, stop once
        the squared residual norm of the (1+lambda)-scaled system is <= eps (times ||b||^2 when
        `relative`); at most max_iter - 1 updates."""
        lam = self.lmbda if lmbda is None else lmbda
        b = b / (1 + lam)
        x = x0.clone()
        r = b - self.system(x, H, Ht, mask, lam)
        p = r.clone()
        rr = batch_dot(r, r)
        if relative:
            eps = eps * batch_dot(b, b)
        it = 0
        for it in range(max_iter):
            active = rr > eps
            if it == max_iter - 1 or not bool(active.any()):
                break
            Ap = self.system(p, H, Ht, mask, lam)
            pAp = batch_dot(p, Ap)
            alpha = torch.where(active & (pAp > 0), rr / torch.where(pAp > 0, pAp, torch.ones_like(pAp)),
                                torch.zeros_like(rr))
            x = x + alpha * p
            r = r - alpha * Ap
            rr_new = batch_dot(r, r)
            beta = torch.where(rr > 0, rr_new / torch.where(rr > 0, rr, torch.ones_like(rr)), torch.zeros_like(rr))
            p = torch.where(active, r + beta * p, p)
            rr = torch.where(active, rr_new, rr)
        self.last_cg_iters = it
        return x

    # ---- the fixed point ---------------------------------------------------------------------------------
    @torch.no_grad()
    def fixed_point(self, Hty, x0, n_out: int, n_in: int, eps_in: float, eps_out: float, H: Op = _ID,
                    Ht: Op = _ID, residuals: Optional[list] = None, iterates: Optional[list] = None):
        """Outer iterations: mask from x_k, CG solve warm-started at x_k, stop when the relative change
        ||x_{k+1} - x_k|| / ||x_k|| (whole batch, as the official code) is below eps_out."""
        x_old = x0.clone()
        x = x_old
        for _ in range(int(n_out)):
            self.cal_mask(x_old)
            x = self.cg(Hty, x_old, n_in, eps_in, H, Ht)
            den = float(torch.linalg.norm(x_old))
            res = float(torch.linalg.norm(x - x_old)) / den if den > 0 else math.inf
            if residuals is not None:
                residuals.append(res)
            if iterates is not None:
                iterates.append(x.clone())
            x_old = x
            if res < eps_out:
                break
        return x

    def denoise(self, y, sigma, n_out: int = 60, n_in: int = 200, eps_in: float = 1e-6, eps_out: float = 1e-5,
                train: bool = False, eps_bck: float = 1e-6, residuals=None, iterates=None):
        """y: (B, 1, h, w) in [0, 1]; sigma: noise level(s) in 0-255 units (float or (B,) tensor)."""
        sigma = torch.as_tensor(sigma, dtype=y.dtype, device=y.device).reshape(-1, 1, 1, 1).expand(y.shape[0], 1, 1, 1)
        self.W1.normalise()
        self.set_sigma(sigma)
        x = self.fixed_point(y, torch.zeros_like(y), n_out, n_in, eps_in, eps_out,
                             residuals=residuals, iterates=iterates)
        if not train:
            return x
        d = x
        mask_d = self.cal_mask(d)  # with gradients w.r.t. the parameters (not w.r.t. x*)
        with torch.no_grad():
            x = self.cg(y, d, n_in, eps_bck, mask=mask_d.detach() if torch.is_tensor(mask_d) else mask_d)
        out = y - self.lmbda * self.Lt(self.L(x.detach(), mask_d), mask_d)
        if out.requires_grad:
            fixed_mask = mask_d.detach() if torch.is_tensor(mask_d) else mask_d
            fixed_lam = self.lmbda.detach()

            def adjoint(grad):  # (I + lambda L^T L) g = grad: the implicit gradient of the fixed point
                with torch.no_grad():
                    # relative tolerance: the official absolute 1e-4 on ||r||^2 would skip the solve
                    # for a mean-reduced loss, whose gradients are tiny
                    return self.cg(grad, grad, n_in, eps_bck, mask=fixed_mask, lmbda=fixed_lam, relative=True)

            out.register_hook(adjoint)
        return out

    @torch.no_grad()
    def solve_inverse_problem(self, y, H: Op, Ht: Op, sigma: float, lmbda: float, x_init=None, n_out: int = 1000,
                              n_in: int = 1000, eps_in: float = 1e-8, eps_out: float = 1e-5, residuals=None):
        """The denoising-trained model reused for y = Hx + n: the mask scaling at sigma_denoiser, lambda
        given (tuned per problem), x0 = H^T y unless given; clipped to [0, 1] as the official code."""
        Hty = Ht(y)
        self.W1.normalise()
        # Hty's dtype: y may be complex (MRI k-space), the image is real
        sig = torch.full((Hty.shape[0], 1, 1, 1), float(sigma), dtype=Hty.dtype, device=Hty.device)
        self.set_sigma(sig)
        self.lmbda = torch.full_like(sig, float(lmbda))
        x0 = Hty.clone() if x_init is None else x_init
        x = self.fixed_point(Hty, x0, n_out, n_in, eps_in, eps_out, H, Ht, residuals=residuals)
        return torch.clip(x, 0, 1)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
