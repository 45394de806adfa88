"""What batching seeds in one process would save on the update step of a small network (issue 33, *Work*).

The generic DAG runs one job per (method, seed). Batching k seeds of a small model in one process (torch.func:
stacked parameters, vmap over them) would amortise PyTorch's per-operator overhead, which dominates on CPU when
the network is small. This measures that bound on sparse_drl's DQN update at its mini shapes (SimBa-lite,
expansion 1, CartPole: 4 inputs, 2 actions, batch 64): forward of the online and target nets, smooth-L1 TD
loss, backward, fused AdamW, Polyak average; k separate networks one after the other against the same k
networks stacked. One thread, CPU time (time.process_time). The optimiser's arithmetic is elementwise, so the
stacked update is the same update per seed (checked below against the separate ones to float tolerance).

    python scripts/bench_seed_batching.py [--widths 16 64 256] [--k 3] [--steps 400]
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state

from icml25.studies.sparse_drl.agents import polyak
from icml25.studies.sparse_drl.nets import build_simba

OBS, ACT, BATCH, LR, WD, GAMMA, TAU = 4, 2, 64, 1e-4, 1e-2, 0.99, 0.005


def seed_nets(width: int, k: int):
    """k SimBa-lite Q-networks with their own initial weights. build_simba makes a new class per call and
    torch.func stacks modules of one class, so each seed's weights are loaded into a copy of the first."""
    nets = [build_simba(OBS, width, ACT, 1, 1)]
    for _ in range(k - 1):
        q = copy.deepcopy(nets[0])
        q.load_state_dict(build_simba(OBS, width, ACT, 1, 1).state_dict())
        nets.append(q)
    return nets


def batches(k: int, steps: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(k, BATCH, OBS, generator=g), torch.randint(0, ACT, (k, BATCH), generator=g),
             torch.randn(k, BATCH, generator=g), torch.randn(k, BATCH, OBS, generator=g),
             (torch.rand(k, BATCH, generator=g) < 0.05).float()) for _ in range(steps)]


def step(opt, loss) -> None:
    opt.zero_grad()
    loss.backward()
    opt.step()


def separate(nets, data):
    """k networks updated one after the other, as k jobs would (the job's own update code, minus replay)."""
    targets = [copy.deepcopy(q).requires_grad_(False) for q in nets]
    opts = [torch.optim.AdamW(q.parameters(), lr=LR, weight_decay=WD, fused=True) for q in nets]
    t0 = time.process_time()
    for o, a, r, no, d in data:
        for i, (q, qt, opt) in enumerate(zip(nets, targets, opts)):
            step(opt, separate_loss(q, qt, i, o, a, r, no, d))
            polyak(qt, q, TAU)
    return time.process_time() - t0


def separate_loss(q, qt, i, o, a, r, no, d):
    """Seed i's TD loss (smooth L1, mean over the batch), as the job computes it."""
    with torch.no_grad():
        y = r[i] + GAMMA * (1 - d[i]) * qt(no[i]).max(1).values
    return F.smooth_l1_loss(q(o[i]).gather(1, a[i].view(-1, 1)).squeeze(1), y)


def stack(nets):
    """The k networks as one stacked parameter set (leaves), a target copy, their buffers and a stateless shell."""
    params, bufs = stack_module_state(nets)
    params = {n: p.detach().clone().requires_grad_(True) for n, p in params.items()}
    return params, {n: p.detach().clone() for n, p in params.items()}, bufs, copy.deepcopy(nets[0]).to("meta")


def stacked_loss(params, tparams, bufs, base, o, a, r, no, d):
    """The sum over seeds of each seed's TD loss, every operator vmapped over the seeds: the gradient with
    respect to seed i's parameters is seed i's own loss gradient."""
    def q_all(p, x):
        return torch.vmap(lambda pi, bi, xi: functional_call(base, (pi, bi), (xi,)))(p, bufs, x)

    with torch.no_grad():
        y = r + GAMMA * (1 - d) * q_all(tparams, no).max(2).values
    qa = q_all(params, o).gather(2, a.unsqueeze(2)).squeeze(2)
    return F.smooth_l1_loss(qa, y, reduction="none").mean(1).sum()


def stacked(nets, data):
    """The same k networks stacked, one update of all of them per step."""
    params, tparams, bufs, base = stack(nets)
    opt = torch.optim.AdamW(list(params.values()), lr=LR, weight_decay=WD, fused=True)
    t0 = time.process_time()
    for batch in data:
        step(opt, stacked_loss(params, tparams, bufs, base, *batch))
        with torch.no_grad():  # agents.polyak's arithmetic on the stacked tensors
            tp = list(tparams.values())
            torch._foreach_mul_(tp, 1.0 - TAU)
            torch._foreach_add_(tp, list(params.values()), alpha=TAU)
    return time.process_time() - t0, params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--steps", type=int, default=400)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, k = {args.k} seeds, {args.steps} updates, batch {BATCH}")
    print("| width | separate: ms per seed-update | stacked: ms per seed-update | ratio | max abs diff after |")
    print("|---|---|---|---|---|")
    for w in args.widths:
        torch.manual_seed(w)
        nets = seed_nets(w, args.k)
        data = batches(args.k, args.steps)
        # warm-up of both paths (allocator, first-call dispatch), then the timed runs from the same start
        separate([copy.deepcopy(q) for q in nets], data[:20])
        stacked([copy.deepcopy(q) for q in nets], data[:20])
        sep_nets = [copy.deepcopy(q) for q in nets]
        t_sep = separate(sep_nets, data)
        t_st, params = stacked([copy.deepcopy(q) for q in nets], data)
        diff = max(float((params[n][i] - p).detach().abs().max()) for i, q in enumerate(sep_nets)
                   for n, p in q.named_parameters())
        per = 1e3 / (args.k * args.steps)
        print(f"| {w} | {t_sep * per:.3f} | {t_st * per:.3f} | {t_st / t_sep:.2f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
