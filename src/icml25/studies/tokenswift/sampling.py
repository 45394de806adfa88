"""Target-token selection shared by AR and speculative decoding: temperature, the contextual penalty,
min-p, and a position-indexed random stream.

* Contextual penalty (CTRL-style over a window, as the official `norm_logits`): logits of the tokens
  present in the last W tokens are divided by theta if positive and multiplied by theta if negative (once
  per token, whatever its count).
* min-p: tokens with probability < min_p * max probability are removed (at least one kept).
* Sampling is Gumbel-max with noise drawn from a generator seeded by (seed, absolute position[, salt]):
  an exact sample from the processed distribution, and the *same* sample for the same position whoever
  asks, which is what makes AR and TokenSwift outputs comparable token by token. salt != 0 gives an
  independent stream (the official per-path sampling, or i.i.d. sampling for the histogram test).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SampleArgs:
    greedy: bool = False
    temperature: float = 1.0
    penalty: float = 1.2
    window: int = 1024
    min_p: float = 0.1
    seed: int = 0


def penalise(logits: torch.Tensor, present: torch.Tensor, theta: float) -> torch.Tensor:
    """logits [N, V]; present [N, V] bool (token in the node's window)."""
    if theta == 1.0:
        return logits
    pen = torch.where(logits < 0, logits * theta, logits / theta)
    return torch.where(present, pen, logits)


def processed(logits: torch.Tensor, present: torch.Tensor, a: SampleArgs) -> torch.Tensor:
    """Unnormalised log-probabilities after temperature, penalty and min-p (-inf = removed); for greedy the
    penalised logits (argmax is all that is used)."""
    x = logits.float()
    if not a.greedy:
        x = x / a.temperature
    x = penalise(x, present, a.penalty)
    if a.greedy or a.min_p <= 0:
        return x
    # p < min_p * p_max  <=>  x < x_max + log(min_p)
    keep = x >= x.max(-1, keepdim=True).values + torch.log(torch.tensor(a.min_p))
    return x.masked_fill(~keep, float("-inf"))


def probs(logits, present, a: SampleArgs) -> torch.Tensor:
    x = processed(logits, present, a)
    if a.greedy:
        out = torch.zeros_like(x)
        out.scatter_(-1, x.argmax(-1, keepdim=True), 1.0)
        return out
    return torch.softmax(x, -1)


class Stream:
    """Gumbel noise per (absolute position, salt), cached for the positions of the current step."""

    def __init__(self, seed: int, vocab: int, device="cpu"):
        self.seed, self.V, self.device = int(seed), int(vocab), device
        self._cache: dict = {}

    def gumbel(self, pos: int, salt: int = 0) -> torch.Tensor:
        key = (int(pos), int(salt))
        g = self._cache.get(key)
        if g is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            gen = torch.Generator().manual_seed((self.seed * 1_000_003 + int(pos)) * 7919 + int(salt))
            u = torch.rand(self.V, generator=gen, dtype=torch.float64).clamp_(1e-300, 1.0)
            g = (-torch.log(-torch.log(u))).float().to(self.device)
            self._cache[key] = g
        return g


def choose(x: torch.Tensor, positions, a: SampleArgs, stream: Stream, salts=None) -> list[int]:
    """Target tokens for processed rows x [N, V] at absolute positions [N] (the position being generated)."""
    if a.greedy:
        return x.argmax(-1).tolist()
    salts = salts or [0] * len(positions)
    g = torch.stack([stream.gumbel(p, s) for p, s in zip(positions, salts)])
    return (x + g).argmax(-1).tolist()


def window_counts(seq: list[int], window: int, vocab: int) -> torch.Tensor:
    base = torch.tensor(seq[-window:] if window > 0 else [], dtype=torch.long)
    return torch.bincount(base, minlength=vocab)
