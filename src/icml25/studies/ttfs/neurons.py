"""The generalised TTFS neuron (our reading of TTFSFormer §3 / Alg. 1): time coding, the receiving and the
emitting stage, the monotone pieces of GELU / SiLU / x^2, and a time-stepped reference simulation.

Code. A neuron group has a calibrated interval [a, b]. A value x in [a, b] is carried by ONE spike at time
t in [0, 1] (one window, T_w = 1) through the linear decoding kernel D(t) = b - (b - a) t: large values fire
early. t = 1 is "no spike" and decodes to a, so a neuron at its floor stays silent.

Receiving stage. A spike at t_j starts a ramp PSP of slope (b_j - a_j); at the window's end it has reached
(b_j - a_j)(1 - t_j) = D(t_j) - a_j, so V_i = sum_j w_ij (b_j - a_j)(1 - t_j) + [bias_i + sum_j w_ij a_j]:
the affine map of the decoded inputs, exactly, with the constant folded into the bias.

Emitting stage. The neuron fires at the first time where its threshold kernel theta(t) = F^{-1}(D(t)) meets
V (V >= theta for increasing F, V <= theta for decreasing F), so D(t_out) = F(V): it emits F(V) for any
monotone F. With p levels per window (time step 1/p) the threshold kernel is lowered by half a level,
theta_k = F^{-1}(D(k/p) - (b - a)/(2p)), so the first grid step that crosses it is the nearest level:
t = round(p (b - F(V)) / (b - a)) / p, a decoding error of at most (b - a)/(2p) (our choice; an unshifted
kernel fires one step late on average and biases every value down). p = None is exact (float) timing.
Intervals may be per neuron (tensors broadcast against the group's shape).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

# grid rounding guard: u*p that is an integer up to float error must not jump one step
_EPS = 1e-9


def encode(y: torch.Tensor, a, b, p: Optional[int]) -> torch.Tensor:
    """Spike time in [0, 1] of values y (clipped to [a, b]); p levels per window, None = exact timing."""
    a = torch.as_tensor(a, dtype=y.dtype)
    b = torch.as_tensor(b, dtype=y.dtype)
    u = (b - torch.minimum(torch.maximum(y, a), b)) / (b - a)
    if p is None:
        return u
    # the first step k whose lowered threshold D(k/p) - (b-a)/(2p) is <= y: k = ceil(u p - 1/2)
    return torch.clamp(torch.ceil(u * p - 0.5 - _EPS), 0, p) / p


def decode(t: torch.Tensor, a, b) -> torch.Tensor:
    """The decoding kernel D(t) = b - (b - a) t."""
    return b - (b - a) * t


@dataclass
class Spikes:
    """One neuron group's output: a spike time per neuron (1 = silent) and the group's interval."""

    t: torch.Tensor
    a: object  # float or a tensor broadcast against t (per-neuron intervals)
    b: object

    @property
    def spiked(self) -> torch.Tensor:
        return self.t < 1

    def psp(self) -> torch.Tensor:
        """Each neuron's ramp PSP at the end of the window, per unit weight: (b - a)(1 - t)."""
        return (self.b - self.a) * (1 - self.t)

    def value(self) -> torch.Tensor:
        """What a receiver integrates per unit weight: the PSP plus the interval's floor a (folded into its
        bias), i.e. D(t)."""
        return self.psp() + self.a


# ---- the monotone pieces --------------------------------------------------------------------------------
# A non-monotone F is a sum of monotone pieces, one neuron each, merged with weight +1 downstream. Each
# piece is constant (its floor) on the other side of F's minimum x0, so only one piece of a pair is active.

SQRT2 = math.sqrt(2.0)


def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / SQRT2))


def silu(x):
    return x * torch.sigmoid(x)


def _argmin(f, lo: float, hi: float) -> float:
    """The minimiser of a unimodal f on [lo, hi] (golden section, float64)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(200):
        c, d = b - g * (b - a), a + g * (b - a)
        if float(f(torch.tensor(c, dtype=torch.float64))) < float(f(torch.tensor(d, dtype=torch.float64))):
            b = d
        else:
            a = c
    return (a + b) / 2


GELU_X0 = _argmin(gelu, -3.0, 0.0)   # ~ -0.7518
SILU_X0 = _argmin(silu, -3.0, 0.0)   # ~ -1.2785


@dataclass(frozen=True)
class Fn:
    """A monotone emitting function: F, whether it increases, its threshold kernel F^{-1}, and its floor
    (the smallest value it takes, the interval's a; None for an unbounded signed identity)."""

    name: str
    f: Callable
    increasing: bool
    inverse: Optional[Callable] = None
    floor: Optional[float] = None


def _bisect(g, y, lo: float, hi: float, increasing: bool):
    """The v in [lo, hi] with g(v) = y for a monotone g (the threshold kernel of a piece without a closed-form
    inverse); 200 halvings reach float64 resolution."""
    y = torch.as_tensor(y, dtype=torch.float64)
    lo_t, hi_t = torch.full_like(y, lo), torch.full_like(y, hi)
    for _ in range(200):
        mid = (lo_t + hi_t) / 2
        above = (g(mid) >= y) if increasing else (g(mid) <= y)
        hi_t, lo_t = torch.where(above, mid, hi_t), torch.where(above, lo_t, mid)
    return (lo_t + hi_t) / 2


def _pieces(name, f, x0):
    f0 = float(f(torch.tensor(x0, dtype=torch.float64)))
    f_up = lambda v: f(torch.clamp(v, min=x0))
    f_down = lambda v: f(torch.clamp(v, max=x0)) - f0
    up = Fn(f"{name}+", f_up, True, lambda y: _bisect(f_up, y, x0, 1e3, True), floor=f0)
    down = Fn(f"{name}-", f_down, False, lambda y: -_bisect(lambda u: f_down(-u), y, -x0, 1e3, True), floor=0.0)
    return up, down


IDENTITY = Fn("id", lambda v: v, True, lambda y: y)
RELU = Fn("relu", lambda v: torch.clamp(v, min=0), True, lambda y: y, floor=0.0)
EXP = Fn("exp", torch.exp, True, torch.log, floor=0.0)
LOG = Fn("log", torch.log, True, torch.exp)
RSQRT = Fn("rsqrt", torch.rsqrt, False, lambda y: 1.0 / (y * y))
SQUARE = (Fn("sq+", lambda v: torch.clamp(v, min=0) ** 2, True, lambda y: torch.sqrt(y), floor=0.0),
          Fn("sq-", lambda v: torch.clamp(v, max=0) ** 2, False, lambda y: -torch.sqrt(y), floor=0.0))
GELU = _pieces("gelu", gelu, GELU_X0)
SILU = _pieces("silu", silu, SILU_X0)


def emit(V: torch.Tensor, fn: Fn, a: float, b: float, p: Optional[int]) -> Spikes:
    """The emitting stage in closed form: the spike time that encodes F(V) (clipped to [a, b])."""
    return Spikes(encode(fn.f(V), a, b, p), a, b)


# ---- a time-stepped reference simulation -----------------------------------------------------------------

def simulate_layer(t_in: torch.Tensor, a_in: float, b_in: float, W: torch.Tensor, bias: torch.Tensor, fn: Fn,
                   a: float, b: float, p: int):
    """One affine neuron layer simulated step by step (dt = 1/p), as a check of the closed form.

    t_in: (n_in,) input spike times on the grid (1 = silent). Receiving window: at step k the inputs that
    spiked at t <= k/p drive the current; V integrates current * dt. Emitting window: at step k the threshold
    kernel theta(k/p) = F^{-1}(D(k/p)) is compared with V; the neuron fires once, at the first crossing, and
    is then refractory. Returns (spike times (n_out,), spike counts (n_out,), synaptic events)."""
    t_in = t_in.to(torch.float64)
    n_out = W.shape[0]
    V = bias.to(torch.float64) + W.to(torch.float64) @ torch.full_like(t_in, a_in)  # the folded floor
    current = torch.zeros(n_out, dtype=torch.float64)
    arrived = torch.zeros_like(t_in, dtype=torch.bool)
    events = 0
    for k in range(p):
        now = (t_in <= k / p + _EPS) & ~arrived & (t_in < 1)
        if now.any():
            current = current + (b_in - a_in) * (W[:, now].to(torch.float64)).sum(1)
            events += int(now.sum()) * n_out  # each arriving spike drives one event per synapse
            arrived |= now
        V = V + current / p
    t_out = torch.ones(n_out, dtype=torch.float64)
    count = torch.zeros(n_out, dtype=torch.int64)
    fired = torch.zeros(n_out, dtype=torch.bool)
    for k in range(p + 1):
        d = torch.tensor(b - (b - a) * k / p - (b - a) / (2 * p), dtype=torch.float64)  # lowered half a level
        if fn.increasing:
            # F(V) >= D  <=>  V >= F^{-1}(D); below F's range (D < floor) every V is above the threshold
            theta = fn.inverse(d) if (fn.floor is None or float(d) > fn.floor) else torch.tensor(-math.inf)
            cross = V >= theta - 1e-12
        else:
            theta = fn.inverse(d) if float(d) > 0 else torch.tensor(math.inf)
            cross = V <= theta + 1e-12
        new = cross & ~fired
        if k == p:
            new &= torch.zeros_like(new)  # the window's end: t = 1 is the silent code (decodes to a)
        t_out[new] = k / p
        count[new] += 1
        fired |= new
    return t_out, count, events
