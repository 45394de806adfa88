"""W: a composition of bias-free convolutions with a zero-mean first filter, normalised to unit spectral
norm (official `model/multi_conv.py`).

The normalisation divides by sqrt(L), L = max |DFT(kernel of W^T W)| on an `sn_size` grid: the
"Fourier" estimate of ||W||^2, differentiable, recomputed from the current weights on every call of
`normalise()` (DEAL calls it at the start of every denoise / solve). Convolutions use zero padding of
the first kernel's half-width, as the official code does. L starts at 1 and is only recomputed by
`normalise()`, which DEAL calls for W (not for the mask's M1, as in the official code). Colour input
(channels[0] = 3, the official colour model [3, 12, 24, 128]) uses the official colour estimate of L.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MultiConv2d(nn.Module):
    def __init__(self, channels: list[int], kernel: int, sn_size: int = 256, zero_mean: bool = True):
        super().__init__()
        self.channels, self.kernel, self.sn_size, self.zero_mean = list(channels), int(kernel), int(sn_size), zero_mean
        self.pad = self.kernel // 2
        self.weights = nn.ParameterList()
        for cin, cout in zip(self.channels[:-1], self.channels[1:]):
            w = torch.empty(cout, cin, self.kernel, self.kernel)
            nn.init.kaiming_uniform_(w, a=5 ** 0.5)  # nn.Conv2d's default initialisation
            self.weights.append(nn.Parameter(w))
        self.pad_total = self.pad * (len(self.channels) - 1)
        self.L = torch.tensor(1.0)

    def kernels(self) -> list[torch.Tensor]:
        ws = list(self.weights)
        if self.zero_mean:
            ws[0] = ws[0] - ws[0].mean(dim=(1, 2, 3), keepdim=True)
        return ws

    def _conv(self, x, ws):
        for w in ws:
            x = F.conv2d(x, w, padding=self.pad)
        return x

    def _convT(self, x, ws):
        for w in reversed(ws):
            x = F.conv_transpose2d(x, w, padding=self.pad)
        return x

    def raw_WtW_kernel(self, ws) -> torch.Tensor:
        n = 4 * self.pad_total + 1
        dirac = torch.zeros(1, self.channels[0], n, n, dtype=ws[0].dtype, device=ws[0].device)
        # the impulse in the middle input channel (gray: 0; colour: 1, green), as the official code
        dirac[0, self.channels[0] // 2, n // 2, n // 2] = 1.0
        return self._convT(self._conv(dirac, ws), ws)

    def normalise(self) -> torch.Tensor:
        """Recompute L from the current weights (differentiable) and return it. Until called, L = 1: the
        mask network's M1 is never normalised (as in the official code, where only W1 is)."""
        kernel = self.raw_WtW_kernel(self.kernels())
        p = (self.sn_size - 1) // 2 - self.pad_total
        spectrum = torch.fft.fft2(F.pad(kernel, (p, p, p, p))).abs()
        if self.channels[0] == 1:
            self.L = spectrum.max()
        else:  # colour: the official estimate, the sum over input channels of each channel's peak response
            self.L = sum(spectrum[:, c].max() for c in range(self.channels[0]))
        return self.L

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv(x / torch.sqrt(self.L), self.kernels())

    def transpose(self, z: torch.Tensor) -> torch.Tensor:
        return self._convT(z / torch.sqrt(self.L), self.kernels())

    def power_norm(self, size: int = 64, steps: int = 200, seed: int = 0) -> float:
        """||W||_2 of the normalised operator on a size x size image by power iteration (a check)."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            w = self.weights[0]
            u = torch.randn(1, self.channels[0], size, size, generator=g, dtype=w.dtype).to(w.device)
            for _ in range(steps):
                u = self.transpose(self(u))
                u = u / u.norm()
            return float(self.transpose(self(u)).norm().sqrt())
