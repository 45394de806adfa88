"""NTK-parameterised DeepONet and FNO1d (the paper's models) and the `neuralop` reference FNO.

NTK parameterisation: every weight is drawn N(0, 1) and a layer computes W x / sqrt(fan_in) + b, so the
network's output and its tangent kernel have width-independent scale at initialisation and the Hessian
of the output shrinks like 1/sqrt(width) (the paper's Hessian bounds rely on it).
"""
from __future__ import annotations

import math

import torch
from torch import nn

ACTIVATIONS = {"tanh": torch.tanh, "gelu": nn.functional.gelu, "softplus": nn.functional.softplus}


class NTKLinear(nn.Module):
    """y = W x / sqrt(fan_in) + beta * b with W, b ~ N(0, 1); acts on the last dimension."""

    def __init__(self, fan_in: int, fan_out: int, bias: bool = True, beta: float = 1.0):
        super().__init__()
        self.fan_in, self.beta = fan_in, beta
        self.weight = nn.Parameter(torch.randn(fan_out, fan_in))
        self.bias = nn.Parameter(torch.randn(fan_out)) if bias else None

    def forward(self, x):
        y = x @ self.weight.T / math.sqrt(self.fan_in)
        return y + self.beta * self.bias if self.bias is not None else y


class NTKMLP(nn.Module):
    """in -> width -> ... -> width -> out, NTK layers, smooth activation after every hidden layer."""

    def __init__(self, d_in: int, width: int, d_out: int, depth: int, act: str = "tanh", beta: float = 1.0):
        super().__init__()
        dims = [d_in] + [width] * depth
        self.hidden = nn.ModuleList(NTKLinear(a, b, beta=beta) for a, b in zip(dims[:-1], dims[1:]))
        self.readout = NTKLinear(width, d_out, beta=beta)
        self.act = ACTIVATIONS[act]

    def features(self, x):
        for layer in self.hidden:
            x = self.act(layer(x))
        return x

    def forward(self, x):
        return self.readout(self.features(x))


class DeepONet(nn.Module):
    """G(u)(y) = K^-1/2 sum_k f_k(u) g_k(y): branch f on the sensor values, trunk g on the query point.

    forward(u (n, sensors), y (q, d)) -> (n, q): every function is evaluated at the shared query points.
    """

    def __init__(self, sensors: int, d_y: int, width: int, K: int, depth: int = 2, act: str = "tanh",
                 beta: float = 1.0):
        super().__init__()
        self.K = K
        self.branch = NTKMLP(sensors, width, K, depth, act, beta)
        self.trunk = NTKMLP(d_y, width, K, depth, act, beta)

    def forward(self, u, y):
        return self.branch(u) @ self.trunk(y).T / math.sqrt(self.K)

    def blocks(self) -> dict[str, list]:
        return {"branch": list(self.branch.parameters()), "trunk": list(self.trunk.parameters())}


class SpectralConv1d(nn.Module):
    """(K v)(x) = IFFT( R_k . FFT(v)_k )(x) for the lowest `modes` frequencies, times `scale`.

    R is complex (in, out, modes), stored as its real and imaginary parts, each N(0, 1/2) (E|R|^2 = 1).
    With scale = 1/sqrt(in) it is the NTK spectral layer; with scale = 1, bias and fft_norm="forward"
    it computes exactly what `neuralop.layers.spectral_convolution.SpectralConv` computes in 1D.
    """

    def __init__(self, in_ch: int, out_ch: int, modes: int, scale: float | None = None, bias: bool = False,
                 fft_norm: str = "forward"):
        super().__init__()
        self.modes, self.fft_norm = modes, fft_norm
        self.scale = 1.0 / math.sqrt(in_ch) if scale is None else scale
        self.weight = nn.Parameter(torch.randn(in_ch, out_ch, modes, 2) / math.sqrt(2.0))
        self.bias = nn.Parameter(torch.zeros(out_ch, 1)) if bias else None

    def forward(self, x):  # x: (batch, in, grid)
        n = x.shape[-1]
        x_hat = torch.fft.rfft(x, norm=self.fft_norm)
        k = min(self.modes, x_hat.shape[-1])
        w = torch.view_as_complex(self.weight[:, :, :k].contiguous())
        out_hat = torch.zeros(x.shape[0], w.shape[1], x_hat.shape[-1], dtype=x_hat.dtype, device=x.device)
        out_hat[:, :, :k] = torch.einsum("bik,iok->bok", x_hat[:, :, :k], w) * self.scale
        y = torch.fft.irfft(out_hat, n=n, norm=self.fft_norm)
        return y + self.bias if self.bias is not None else y


class FNO1d(nn.Module):
    """NTK FNO: v0 = P [u, x]; v_{l+1} = act(W_l v_l / sqrt(m) + K_l v_l); out = q^T v_L / sqrt(m).

    Input (n, grid) values of u; the grid coordinate in [0, 1) is appended as a second channel.
    """

    def __init__(self, width: int, modes: int = 16, layers: int = 4, act: str = "gelu", beta: float = 1.0):
        super().__init__()
        self.lift = NTKLinear(2, width, beta=beta)
        self.pointwise = nn.ModuleList(NTKLinear(width, width, beta=beta) for _ in range(layers))
        self.spectral = nn.ModuleList(SpectralConv1d(width, width, modes) for _ in range(layers))
        self.readout = NTKLinear(width, 1, beta=beta)
        self.act = ACTIVATIONS[act]

    def forward(self, u):
        n, grid = u.shape
        x = torch.arange(grid, dtype=u.dtype, device=u.device) / grid
        v = self.lift(torch.stack([u, x.expand(n, grid)], dim=-1))  # (n, grid, m)
        for W, Kc in zip(self.pointwise, self.spectral):
            v = self.act(W(v) + Kc(v.transpose(1, 2)).transpose(1, 2))
        return self.readout(v).squeeze(-1)


class NeuralopFNO(nn.Module):
    """`neuralop.models.FNO` (standard parameterisation, its defaults) behind our (n, grid) -> (n, grid) API.

    n_modes = 2 * modes - 1 keeps the same `modes` lowest rfft coefficients as our FNO1d (neuralop
    stores n_modes // 2 + 1 of them for real inputs). Its grid positional embedding adds x in [0, 1).
    """

    def __init__(self, width: int, modes: int = 16, layers: int = 4):
        super().__init__()
        try:
            from neuralop.models import FNO
        except ImportError:
            from icml25.core.errors import UserError

            raise UserError("neuralop_width: the neuralop methods need `pip install neuraloperator==2.0.0`") from None
        self.net = FNO(n_modes=(2 * modes - 1,), in_channels=1, out_channels=1, hidden_channels=width,
                       n_layers=layers)

    def forward(self, u):
        return self.net(u[:, None, :])[:, 0, :]


def build(kind: str, width: int, spec: dict, meta: dict) -> nn.Module:
    """kind: don | fno | neuralop. meta: shapes of the problem (sensors, d_y)."""
    if kind == "don":
        return DeepONet(meta["sensors"], meta["d_y"], width, int(spec["K"]), int(spec["depth"]),
                        spec.get("act", "tanh"), float(spec.get("beta", 1.0)))
    if kind == "fno":
        return FNO1d(width, int(spec["modes"]), int(spec["layers"]), spec.get("act", "gelu"),
                     float(spec.get("beta", 1.0)))
    if kind == "neuralop":
        return NeuralopFNO(width, int(spec["modes"]), int(spec["layers"]))
    raise ValueError(f"unknown model kind {kind!r}")
