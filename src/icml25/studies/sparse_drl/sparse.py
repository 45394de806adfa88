"""One-shot random pruning with Erdos-Renyi-Kernel (ERK) layer densities, kept for all of training.

The paper (and its JaxPruner-based code) prunes every weight matrix (ndim > 1; not biases, not LayerNorm)
once before training with a random mask whose per-layer density is ERK: density_l = eps (n_in + n_out) /
(n_in n_out), eps chosen so the global density is 1 - s, layers whose density would exceed 1 are made
dense and eps is solved again. Parameters, gradients and optimiser updates are masked, so a pruned weight
is exactly 0 for the whole run (AdamW: masked gradient -> zero moments -> zero step, and decay of 0 is 0).
"""
from __future__ import annotations

import math


def erk_densities(shapes: dict, sparsity: float, power: float = 1.0) -> dict:
    """Per-layer densities (1 - sparsity_l) of ERK for global sparsity `sparsity` (JaxPruner's rule)."""
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
    dense: set = set()
    while True:
        divisor, rhs, raw = 0.0, 0.0, {}
        for name, shape in shapes.items():
            n = math.prod(shape)
            n_zeros = math.floor(sparsity * n)
            if name in dense:
                rhs -= n_zeros
            else:
                rhs += n - n_zeros
                raw[name] = (sum(shape) / n) ** power
                divisor += raw[name] * n
        if not raw:
            return {name: 1.0 for name in shapes}
        eps = rhs / divisor
        top = max(raw.values())
        if top * eps > 1.0:
            dense |= {name for name, r in raw.items() if r == top}
            continue
        return {name: (1.0 if name in dense else eps * raw[name]) for name in shapes}


def prunable(module) -> list:
    """(name, parameter) of every weight matrix of a module: ndim > 1 (linear kernels)."""
    return [(n, p) for n, p in module.named_parameters() if p.ndim > 1]


class Masker:
    """Fixed binary masks for one network; `sparsity=None` means no masking at all (the dense agent).

    Masks are drawn from their own torch.Generator (seeded by `seed`), so drawing them never changes
    the network's initialisation or any other random stream: at s = 0 the sparse agent is the dense one.
    """

    def __init__(self, module, sparsity: float, seed: int):
        import torch

        self.module = module
        self.sparsity = float(sparsity)
        params = prunable(module)
        self.densities = erk_densities({n: tuple(p.shape) for n, p in params}, self.sparsity)
        gen = torch.Generator().manual_seed(int(seed))
        self.masks = {}
        for name, p in params:
            n = p.numel()
            k = int(round(self.densities[name] * n))
            mask = torch.zeros(n, dtype=p.dtype)
            mask[torch.randperm(n, generator=gen)[:k]] = 1.0
            self.masks[name] = mask.view_as(p).to(p.device)
        self._params = dict(params)
        self.apply_params()

    def apply_params(self) -> None:
        import torch

        with torch.no_grad():
            for name, m in self.masks.items():
                self._params[name].mul_(m)

    def apply_grads(self) -> None:
        for name, m in self.masks.items():
            g = self._params[name].grad
            if g is not None:
                g.mul_(m)

    def active_params(self) -> int:
        """Active (unpruned) parameters: kept mask entries plus every unmasked parameter (biases, LN)."""
        n = sum(int(m.sum().item()) for m in self.masks.values())
        return n + sum(p.numel() for name, p in self.module.named_parameters() if name not in self.masks)

    def global_density(self) -> float:
        kept = sum(m.sum().item() for m in self.masks.values())
        return kept / sum(m.numel() for m in self.masks.values())


def count_params(module) -> int:
    return sum(p.numel() for p in module.parameters())


def masked_step(opt, maskers) -> None:
    """One optimiser step with masked gradients before and masked parameters after (JaxPruner's order)."""
    for mk in maskers:
        mk.apply_grads()
    opt.step()
    for mk in maskers:
        mk.apply_params()


def simba_shapes(in_dim: int, hidden: int, out_dim: int, num_blocks: int, expansion: int) -> dict:
    """Weight-matrix shapes (out, in) of nets.build_simba, named as its parameters."""
    shapes = {"inp.weight": (hidden, in_dim)}
    for b in range(num_blocks):
        shapes[f"blocks.{b}.fc1.weight"] = (hidden * expansion, hidden)
        shapes[f"blocks.{b}.fc2.weight"] = (hidden, hidden * expansion)
    shapes["head.weight"] = (out_dim, hidden)
    return shapes


def simba_param_counts(in_dim, hidden, out_dim, num_blocks, expansion, sparsity=None) -> tuple:
    """(active, total) parameters of a SimBa net without building it (ERK counts as Masker rounds them)."""
    shapes = simba_shapes(in_dim, hidden, out_dim, num_blocks, expansion)
    # biases: inp, fc1, fc2, head; LayerNorm weight+bias: one per block + the final one
    other = hidden + num_blocks * (hidden * expansion + hidden) + out_dim + 2 * hidden * (num_blocks + 1)
    total = sum(math.prod(s) for s in shapes.values()) + other
    if sparsity is None:
        return total, total
    dens = erk_densities(shapes, sparsity)
    return sum(int(round(dens[n] * math.prod(s))) for n, s in shapes.items()) + other, total
