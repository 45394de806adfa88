"""Uniform quantisers with straight-through gradients, the searchable mixed-precision convolution and the
fixed-policy convolution, and the BitOPs count.

Follows GMPQ's `models/quant_module.py` / `quantize_utils.py` (read, not copied):
* weights: symmetric uniform, clip threshold max|W| (GMPQ fixes it at the first call; we take it per call,
  detached), step threshold / (2^(b-1) - 1), so at most 2^b - 1 <= 2^b levels;
* activations: PACT-style unsigned clip to a learnable range (init 6, as GMPQ's `init_range`), step
  range / (2^b - 1), so at most 2^b levels;
* the gradient is straight-through (identity) inside the clip range; the clip itself passes the PACT
  gradient to the range parameter;
* a searchable layer mixes its weight-bit branches (softmax over logits) into one weight and its
  activation-bit branches into one activation, then convolves once (`MixActivConv2d`, shared weights as
  GMPQ's `SharedMixQuantConv2d`); its complexity is size_product * E[b_a] * E[b_w].
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def _ste(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Value q, gradient of x (identity)."""
    return x + (q - x).detach()


def quantize_weight(w: torch.Tensor, bits: int) -> torch.Tensor:
    """Symmetric uniform k-bit quantiser with threshold max|w|; STE gradient."""
    t = w.detach().abs().max().clamp_min(1e-8)
    scale = t / (2.0 ** (bits - 1) - 1.0)
    q = torch.round(w.detach().clamp(-t, t) / scale) * scale
    return _ste(w, q)


def clip_activation(x: torch.Tensor, rng: torch.Tensor) -> torch.Tensor:
    """PACT clip to [0, rng] (GMPQ's half-wave form 0.5 (|x| - |x - r| + r)): gradient 1 inside, to r above."""
    return 0.5 * (x.abs() - (x - rng).abs() + rng)


def quantize_activation(x: torch.Tensor, rng: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned uniform k-bit quantiser on [0, rng]; STE gradient inside the clip range."""
    c = clip_activation(x, rng)
    scale = rng.detach().clamp_min(1e-8) / (2.0 ** bits - 1.0)
    q = torch.round(c.detach() / scale) * scale
    return _ste(c, q)


class QConv(nn.Module):
    """A conv (or, with kernel 1 on a 1x1 map, a linear layer) with the given weight and activation bits.
    bits None = full precision (the FP model)."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0, wbits=None, abits=None, init_range=6.0, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False)
        self.wbits, self.abits = wbits, abits
        self.act_range = nn.Parameter(torch.tensor([float(init_range)]))
        self.signed_input = False

    def forward(self, x):
        if self.abits is not None and not self.signed_input:
            x = quantize_activation(x, self.act_range, self.abits)
        w = self.conv.weight if self.wbits is None else quantize_weight(self.conv.weight, self.wbits)
        return F.conv2d(x, w, None, self.conv.stride, self.conv.padding, 1, self.conv.groups)


class MixConv(nn.Module):
    """Searchable super-layer: softmax-weighted weight-bit and activation-bit branches, one convolution."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0, bits=(2, 3, 4, 6), init_range=6.0, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False)
        self.bits = tuple(int(b) for b in bits)
        self.alpha_w = nn.Parameter(torch.full((len(self.bits),), 0.01))
        self.alpha_a = nn.Parameter(torch.full((len(self.bits),), 0.01))
        # one learnable range per activation branch, as GMPQ (each QuantActiv has its own)
        self.act_range = nn.Parameter(torch.full((len(self.bits),), float(init_range)))

    def forward(self, x):
        sa = F.softmax(self.alpha_a, 0)
        xa = sum(sa[i] * quantize_activation(x, self.act_range[i:i + 1], b) for i, b in enumerate(self.bits))
        sw = F.softmax(self.alpha_w, 0)
        w = sum(sw[i] * quantize_weight(self.conv.weight, b) for i, b in enumerate(self.bits))
        return F.conv2d(xa, w, None, self.conv.stride, self.conv.padding, 1, self.conv.groups)

    def expected_bits(self):
        b = torch.tensor(self.bits, dtype=self.alpha_w.dtype, device=self.alpha_w.device)
        return (F.softmax(self.alpha_w, 0) * b).sum(), (F.softmax(self.alpha_a, 0) * b).sum()

    def best_bits(self) -> tuple[int, int]:
        return self.bits[int(self.alpha_w.argmax())], self.bits[int(self.alpha_a.argmax())]


def conv_macs(cin: int, cout: int, kernel: int, out_hw: int, groups: int = 1) -> int:
    """Multiply-accumulates of one conv on one image: (cin / groups) * cout * k^2 * H_out * W_out (a depthwise
    conv, groups = cin, costs cout * k^2 * H_out * W_out)."""
    return int(cin) // int(groups) * int(cout) * int(kernel) ** 2 * int(out_hw) ** 2


def policy_bitops(layers: list[dict], policy: dict) -> float:
    """BitOPs of a policy: sum over layers of MACs * b_w * b_a (fixed layers at their own bits)."""
    total = 0.0
    for L in layers:
        wb, ab = policy.get(L["name"], (L["wbits"], L["abits"])) if L["searchable"] else (L["wbits"], L["abits"])
        total += L["macs"] * int(wb) * int(ab)
    return float(total)
