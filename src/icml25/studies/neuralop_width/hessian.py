"""Top Hessian eigenvalue (in magnitude) of a scalar model output by Hessian-vector-product power iteration.

The paper bounds the spectral norm of the Hessian of the network output with respect to its parameters:
O(1/sqrt(m)) for the whole FNO; for DeepONet O(1/sqrt(m)) on the branch-branch and trunk-trunk blocks
while the branch-trunk cross block stays O(1). `block_norms` measures each of these.
"""
from __future__ import annotations

import torch


def power_iteration(matvec, shapes, iters: int = 50, tol: float = 1e-4, generator=None) -> float:
    """max |eigenvalue| of the symmetric operator `matvec` acting on lists of tensors with `shapes`.

    Returns ||H v|| for the converged unit v; this converges to the top |eigenvalue| even when the top
    eigenvalue comes in a +/- pair (as for an off-diagonal block), where v itself keeps oscillating.
    """
    v = [torch.randn(s, generator=generator) for s in shapes]
    norm = torch.sqrt(sum((x * x).sum() for x in v))
    v = [x / norm for x in v]
    lam = 0.0
    for _ in range(iters):
        w = matvec(v)
        new = float(torch.sqrt(sum((x * x).sum() for x in w)))
        if new == 0.0:
            return 0.0
        v = [x / new for x in w]
        if abs(new - lam) <= tol * new:
            lam = new
            break
        lam = new
    return lam


def _hvp_fn(scalar, params):
    grads = torch.autograd.grad(scalar, params, create_graph=True)

    def hvp(vecs):
        dot = sum((g * v).sum() for g, v in zip(grads, vecs))
        out = torch.autograd.grad(dot, params, retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p) if o is None else o.detach() for o, p in zip(out, params)]

    return hvp


def block_norms(scalar, blocks: dict[str, list], iters: int = 50, tol: float = 1e-4, seed: int = 0,
                cross: tuple[str, str] | None = None) -> dict[str, float]:
    """Spectral norms of the Hessian of `scalar` (a 0-dim tensor with a graph) on the parameter blocks.

    blocks: name -> parameters; "full" is over all of them together. With cross=(a, b) also the norm of
    the off-diagonal block d^2 scalar / d theta_a d theta_b.
    """
    names = list(blocks)
    params = [p for n in names for p in blocks[n]]
    index, start = {}, 0
    for n in names:
        index[n] = (start, start + len(blocks[n]))
        start += len(blocks[n])
    hvp = _hvp_fn(scalar, params)
    gen = torch.Generator().manual_seed(seed)
    shapes = [p.shape for p in params]

    def embed(name, vecs):
        full = [torch.zeros(s) for s in shapes]
        a, b = index[name]
        full[a:b] = vecs
        return full

    def part(name, vecs):
        a, b = index[name]
        return vecs[a:b]

    out = {"full": power_iteration(hvp, shapes, iters, tol, gen)}
    if len(names) > 1:
        for n in names:
            out[n] = power_iteration(lambda v, n=n: part(n, hvp(embed(n, v))), [p.shape for p in blocks[n]],
                                     iters, tol, gen)
    if cross is not None:
        a, b = cross
        na = index[a][1] - index[a][0]

        def cross_op(v):
            va, vb = v[:na], v[na:]
            return part(a, hvp(embed(b, vb))) + part(b, hvp(embed(a, va)))

        out["cross"] = power_iteration(cross_op, [p.shape for p in blocks[a]] + [p.shape for p in blocks[b]],
                                       iters, tol, gen)
    return out
