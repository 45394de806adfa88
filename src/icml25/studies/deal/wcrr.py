"""WCRR-NN (Goujon, Neumayer, Unser, "Learning Weakly Convex Regularizers for Convergent Image-Reconstruction
Algorithms", SIAM J. Imaging Sci. 2024, arXiv 2308.10542): the learned-regulariser baseline, pretrained weights
only (full scale). Written from the official code: axgoujon/weakly_convex_ridge_regularizer (models/
wc_conv_net.py, spline_module.py, utils.py: the model, its loader and the denoising solver) and
axgoujon/convex_ridge_regularizers (inverse_problems/utils_inverse_problems/reconstruction_map_wcrr.py: SAGD).

R(x, σ) = Σ_{c, pixels} ψ_c((W x)_c), W the study's MultiConv2d (filters.py: composed bias-free convolutions,
zero-mean first filter) divided by sqrt(L), L = ||W||² by power iteration (the official test scripts), and
  ψ_c(t) = (μ Φ_cvx(s_c t) − ρ Φ_ccv(s_c t)) / s_c²,    ψ_c'(t) = (μ φ_cvx(s_c t) − ρ φ_ccv(s_c t)) / s_c,
φ_cvx, φ_ccv one linear spline each, shared by all channels, projected to slopes in [0, 1], zero end slopes
(constant outside the knots) and antisymmetric, Φ their integrals from 0 (so ψ is even and ψ(0) = 0);
μ = exp(mu_), ρ = 1; s_c(σ) = exp(spline_c(σ)) / (σ + 1e-5), an unconstrained per-channel spline of σ (0-255
units). Hence ψ'' = μ φ_cvx' − ρ φ_ccv' ≥ −ρ = −1 for every σ, and with ||W|| = 1, R + ½||·||² is convex.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from .filters import MultiConv2d
from .splines import LinearSpline

WEIGHTS = "wcrr.pth"  # the weights' name in the processed data directory


def _segment(x, x_min: float, step: float, num_knots: int):
    """(left knot index, offset from it) of x, the first / last segment extended outside the knots. The
    index is clamped after flooring (not x before it): clamping x to x_max - step and flooring can land one
    segment low in float32 and extrapolate the wrong segment there; the official float32 arithmetic does not."""
    k = torch.floor((x - x_min) / step).clamp(0, num_knots - 2)
    return k.long(), x - (x_min + k * step)  # the knot in x's dtype (a long index times a float is float32)


class SafeSpline(LinearSpline):
    """splines.LinearSpline (linear interpolation, linear extension, one spline per channel group) with the
    robust segment index; unconstrained: the official scaling spline of σ (clamp False)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        a = self.num_activations
        x = x.reshape(shape[0], a, shape[1] // a, -1)
        k, d = _segment(x, self.x_min, self.step, self.num_knots)
        k = k + (torch.arange(a, device=x.device) * self.num_knots).view(1, -1, 1, 1)
        flat = self.projected().reshape(-1)
        return (flat[k] + (flat[k + 1] - flat[k]) * (d / self.step)).reshape(shape)


class WeaklyConvexSpline(SafeSpline):
    """The official activation spline: slopes clamped to [0, 1], first / last slope 0 (`clamp`), re-integrated
    from 0 and antisymmetrised (`antisymmetric`); one spline shared by all channels (num_activations = 1)."""

    def __init__(self, num_knots: int, x_min: float, x_max: float, init: str):
        super().__init__(1, num_knots, x_min, x_max, init)

    def projected(self) -> torch.Tensor:
        cs = self.coefficients
        slopes = ((cs[:, 1:] - cs[:, :-1]) / self.step).clamp(0.0, 1.0)
        zero = torch.zeros_like(slopes[:, :1])
        slopes = torch.cat([zero, slopes[:, 1:-1], zero], dim=1)
        new = torch.cat([zero, torch.cumsum(slopes, dim=1) * self.step], dim=1)
        return 0.5 * (new - new.flip(1))

    def derivative(self, x: torch.Tensor) -> torch.Tensor:
        c = self.projected()[0]
        k, _ = _segment(x, self.x_min, self.step, self.num_knots)
        return (c[k + 1] - c[k]) / self.step

    def integral(self, x: torch.Tensor) -> torch.Tensor:
        """∫_0^x of the spline, exact (piecewise quadratic; the official integrates to a quadratic B-spline)."""
        c = self.projected()[0]
        at_knots = torch.cat([c.new_zeros(1), torch.cumsum(0.5 * self.step * (c[1:] + c[:-1]), 0)])

        def from_left(v):
            k, d = _segment(v, self.x_min, self.step, self.num_knots)
            return at_knots[k] + c[k] * d + 0.5 * (c[k + 1] - c[k]) / self.step * d * d
        return from_left(x) - from_left(torch.zeros((), dtype=x.dtype, device=x.device))


class WCRR(nn.Module):
    """The official WCvxConvNet (trained_models/WCRR-CNN: channels [1, 4, 8, 60], 5x5 kernels, 101 knots on
    [-0.1, 0.1], scaling spline of 11 knots on σ in [0, 30], init 5, ρ = 1; 13,763 parameters)."""

    def __init__(self, channels=(1, 4, 8, 60), kernel: int = 5, sn_size: int = 256, num_knots: int = 101,
                 x_max: float = 0.1, scaling_knots: int = 11, noise_range=(0.0, 30.0), scaling_init: float = 5.0,
                 rho: float = 1.0):
        super().__init__()
        self.conv = MultiConv2d(list(channels), kernel, sn_size)
        self.activation_cvx = WeaklyConvexSpline(num_knots, -x_max, x_max, "zero")      # convex part, μ-scaled
        self.activation_ccv = WeaklyConvexSpline(num_knots, -x_max, x_max, "identity")  # concave part
        self.mu_ = nn.Parameter(torch.tensor(4.0))
        self.spline_scaling = SafeSpline(int(channels[-1]), scaling_knots, noise_range[0], noise_range[1],
                                           float(scaling_init))
        self.rho = float(rho)

    @classmethod
    def from_config(cls, c: dict) -> "WCRR":
        return cls(c["channels"], int(c["kernel"]), int(c["sn_size"]), int(c["num_knots"]), float(c["x_max"]),
                   int(c["scaling_knots"]), tuple(c["noise_range"]), float(c["scaling_init"]), float(c["rho"]))

    def mu(self) -> torch.Tensor:
        return self.mu_.exp()

    def scaling(self, sigma: float, batch: int = 1) -> torch.Tensor:
        """s(σ) = exp(spline_c(σ)) / (σ + 1e-5): (batch, channels, 1, 1); σ in 0-255 units."""
        w = self.conv.weights[0]
        sig = torch.full((batch, self.conv.channels[-1], 1, 1), float(sigma), dtype=w.dtype, device=w.device)
        return torch.exp(self.spline_scaling(sig)) / (sig + 1e-5)

    # the profile on the filter responses z = W x, with s = scaling(σ)
    def psi(self, z, s):
        return (self.mu() * self.activation_cvx.integral(z * s) - self.rho * self.activation_ccv.integral(z * s)) / (s * s)

    def dpsi(self, z, s):
        return (self.mu() * self.activation_cvx(z * s) - self.rho * self.activation_ccv(z * s)) / s

    def d2psi(self, z, s):
        return self.mu() * self.activation_cvx.derivative(z * s) - self.rho * self.activation_ccv.derivative(z * s)

    def cost(self, x, s) -> torch.Tensor:
        """R(x) per image."""
        return self.psi(self.conv(x), s).sum(dim=tuple(range(1, x.ndim)))

    def grad(self, x, s) -> torch.Tensor:
        """∇R(x) = Wᵀ ψ'(W x) (closed form)."""
        return self.conv.transpose(self.dpsi(self.conv(x), s))

    @torch.no_grad()
    def set_spectral_norm(self, steps: int, seed: int = 0) -> float:
        """L = ||W||² of the unnormalised filters by power iteration on an sn_size² image (the official
        `spectral_norm(mode="power_method")` before testing); W is divided by sqrt(L) afterwards."""
        w = self.conv.weights[0]
        self.conv.L = torch.tensor(1.0, dtype=w.dtype, device=w.device)
        g = torch.Generator().manual_seed(int(seed))
        n = self.conv.sn_size
        u = torch.randn(1, self.conv.channels[0], n, n, generator=g, dtype=w.dtype).to(w.device)
        for _ in range(int(steps)):
            u = self.conv.transpose(self.conv(u))
            u = u / u.norm()
        self.conv.L = self.conv.transpose(self.conv(u)).norm()
        return float(self.conv.L)


# ---- the official checkpoint ---------------------------------------------------------------------------

def from_official_state(state: dict) -> dict:
    """Map the official WCvxConvNet state-dict keys onto ours (the first convolution's weight is stored
    under torch's parametrisation key; ours applies the zero mean in MultiConv2d.kernels() alike)."""
    official = ("conv_layer.conv_layers.", "activation_cvx.", "activation_ccv.", "spline_scaling.", "mu_")
    stray = [k for k in state if not k.startswith(official)]
    if stray:
        raise RuntimeError(f"not an official WCRR-NN state_dict: unexpected keys {stray[:4]}")
    out = {}
    for k, v in state.items():
        if k.startswith("conv_layer.conv_layers."):
            j = k.split(".")[2]
            k = f"conv.weights.{j}"
        out[k] = v
    return out


def load(weights: Path, cfg: dict, device="cpu") -> WCRR:
    """The official checkpoint ({'state_dict': ...}) into a WCRR built from cfg['wcrr']['model'], strictly
    (weights of another shape or layout fail), then the spectral norm by power iteration."""
    c = cfg["wcrr"]
    ck = torch.load(weights, map_location="cpu", weights_only=True)
    model = WCRR.from_config(c["model"])
    model.load_state_dict(from_official_state(ck["state_dict"]), strict=True)
    model.to(device).eval()
    model.set_spectral_norm(int(c["sn_steps"]))
    return model


def initial(cfg: dict, seed: int, device="cpu") -> WCRR:
    """The official initialisation (φ_cvx = 0, φ_ccv = identity, μ = e⁴, scaling spline 5), filters drawn
    from `seed`: the smoke stand-in, which never sees the pretrained weights."""
    torch.manual_seed(int(seed))
    model = WCRR.from_config(cfg["wcrr"]["model"]).to(device).eval()
    model.set_spectral_norm(int(cfg["wcrr"]["sn_steps"]))
    return model


# ---- solvers ----------------------------------------------------------------------------------------------

@torch.no_grad()
def denoise(model: WCRR, y: torch.Tensor, sigma: float, lmbd: float = 1.0, max_iter: int = 500, tol: float = 1e-4):
    """argmin_x ½||x − y||² + λ R(x, σ) by FISTA with adaptive restart (official `accelerated_gd_batch`,
    as its denoising test calls it: λ = 1, σ the noise level, tol 1e-4 on the relative change, ≤ 500
    iterations, step 1 / (1 + λμ), restart when <step·∇, x_k − x_{k−1}> > 0). One image at a time."""
    s = model.scaling(sigma, y.shape[0])
    step = 1.0 / (1.0 + lmbd * float(model.mu()))
    x, z, t = y.clone(), y.clone(), 1.0
    for i in range(int(max_iter)):
        x_old = x
        g = step * ((z - y) + lmbd * model.grad(z, s))
        x = z - g
        t_old, t = t, 0.5 * (1 + math.sqrt(1 + 4 * t * t))
        z = x + (t_old - 1) / t * (x - x_old)
        res = float((x - x_old).norm() / x.norm()) if i > 0 else 1.0
        if float((g * (x - x_old)).sum()) > 0:  # adaptive restart
            t, z = 1.0, x.clone()
        if res < tol:
            break
    return x


@torch.no_grad()
def reconstruct(model: WCRR, y, A, At, lmbd: float, sigma: float, x_init=None, op_norm: float = 1.0,
                max_iter: int = 1000, tol: float = 1e-5, positivity: bool = True, trace: list | None = None):
    """argmin_x ½||Hx − y||² + λ R(x, σ) by SAGD, the safeguarded accelerated gradient descent of the official
    `SAGD_Recon`: step 1/L with L = λμ + ||H||², momentum reset when <∇f(z_k), z_k − z_{k−1}> +
    (λβ/2)||z_k − z_{k−1}||² > 0 (β = 1.001), projection onto x ≥ 0, stop when ||x_k − x_{k−1}|| / ||x_{k−1}||
    < tol, from x_init (official default 0). `trace` receives the objective after every step."""
    x = torch.zeros_like(At(y)) if x_init is None else x_init.clone()
    s = model.scaling(sigma, x.shape[0])
    L = lmbd * float(model.mu()) + op_norm ** 2
    beta = 1.001

    def grad(v):
        return At(A(v) - y) + lmbd * model.grad(v, s)

    x_old, z_old, t, t_old = x.clone(), x.clone(), 1.0, 1.0
    for _ in range(int(max_iter)):
        z = x + (t_old - 1) / t * (x - x_old)
        gz = grad(z)
        if float((gz * (z - z_old)).sum() + 0.5 * lmbd * beta * ((z - z_old) ** 2).sum()) > 0:
            z, t, t_old = x.clone(), 1.0, 1.0
            gz = grad(z)
        x_old = x
        x = z - gz / L
        if positivity:
            x = x.clamp_min(0)
        t_old, t = t, 0.5 * (1 + math.sqrt(1 + 4 * t * t))
        z_old = z
        if trace is not None:
            trace.append(float(objective(model, x, y, A, lmbd, s)))
        if float((x_old - x).norm() / x_old.norm()) < tol:  # 0 / 0 on a zero start: nan, not a stop
            break
    return x


@torch.no_grad()
def objective(model: WCRR, x, y, A, lmbd: float, s) -> torch.Tensor:
    r = A(x) - y
    return 0.5 * (r.abs() ** 2).sum() + lmbd * model.cost(x, s).sum()
