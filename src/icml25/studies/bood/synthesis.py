"""Latent outlier synthesis: BOOD's boundary search (the paper's contribution), its ablations, and the
samplers of the baselines (Dream-OOD's kNN latent sampler, NPOS's penultimate-space sampler).

All work on features z of the text-aligned latent space, classified by the cosine classifier
cos(z, anchor_c) / tau. Features are kept on the unit sphere (the classifier only sees the direction).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from . import placement as P
from .models import cosine_logits


def _step(z, y, anchors, tau, alpha):
    """One step along the normalised gradient that increases the CE of class y; back onto the sphere."""
    z = z.detach().requires_grad_(True)
    loss = F.cross_entropy(cosine_logits(z, anchors, tau), y, reduction="sum")
    (g,) = torch.autograd.grad(loss, z)
    g = g / g.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return F.normalize(z.detach() + alpha * g, dim=1)


def _pred(z, anchors, tau):
    return cosine_logits(z, anchors, tau).argmax(dim=1)


def steps_to_boundary(z, y, anchors, tau: float, alpha: float, k_max: int, device="cpu"):
    """k(z): the number of gradient steps until argmax != y, capped at k_max (k_max + 1 = never crossed).

    A feature already predicted as another class counts 0 steps. The steps run on `device`.
    Returns (steps, z at its crossing), on the host."""
    z = F.normalize(P.place(torch.as_tensor(z, dtype=torch.float32), device), dim=1)
    y = P.place(torch.as_tensor(y, dtype=torch.long), device)
    anchors = P.place(torch.as_tensor(anchors, dtype=torch.float32), device)
    steps = torch.full((len(z),), k_max + 1, dtype=torch.long, device=z.device)
    crossed = z.clone()
    done = _pred(z, anchors, tau) != y
    steps[done] = 0
    cur = z
    for k in range(1, k_max + 1):
        if bool(done.all()):
            break
        active = ~done
        cur = cur.clone()
        cur[active] = _step(cur[active], y[active], anchors, tau, alpha)
        flip = active & (_pred(cur, anchors, tau) != y)
        steps[flip] = k
        crossed[flip] = cur[flip]
        done = done | flip
    return steps.cpu(), crossed.cpu()


def select_boundary(steps: np.ndarray, y: np.ndarray, r: float, rng=None, mode: str = "boundary") -> np.ndarray:
    """Per class the fraction r of features with the fewest steps (ties broken by index), among features
    the classifier gets right (steps >= 1); mode 'random': the same number drawn at random instead."""
    steps, y = np.asarray(steps), np.asarray(y)
    keep = []
    for c in np.unique(y):
        idx = np.flatnonzero((y == c) & (steps >= 1))
        if len(idx) == 0:
            continue
        n = max(1, int(round(r * len(idx))))
        if mode == "boundary":
            order = idx[np.lexsort((idx, steps[idx]))]
            keep.append(order[:n])
        else:
            keep.append(np.sort(rng.choice(idx, n, replace=False)))
    return np.concatenate(keep) if keep else np.zeros(0, np.int64)


def push(z_cross, y, anchors, tau: float, alpha: float, c: int, device="cpu"):
    """c more gradient steps past the crossing (the CE of the original class keeps increasing), on `device`;
    the result on the host."""
    z = P.place(torch.as_tensor(z_cross, dtype=torch.float32), device)
    y = P.place(torch.as_tensor(y, dtype=torch.long), device)
    anchors = P.place(torch.as_tensor(anchors, dtype=torch.float32), device)
    for _ in range(int(c)):
        z = _step(z, y, anchors, tau, alpha)
    return z.cpu()


def bood_features(z, y, anchors, cfg: dict, rng, mode: str = "boundary"):
    """BOOD's stage 2: step counts, selection (boundary or random), c extra steps. Returns a dict with
    the OOD features, their source labels, the selected indices and every feature's step count."""
    s = cfg["bood"]
    tau, alpha, k_max = float(cfg["latent"]["tau"]), float(s["alpha"]), int(s["k_max"])
    dev = P.device_of(cfg)
    steps, crossed = steps_to_boundary(z, y, anchors, tau, alpha, k_max, dev)
    steps = steps.numpy()
    sel = select_boundary(steps, y, float(s["r"]), rng, mode)
    sel = sel[steps[sel] <= k_max]  # never crossed within the cap: no OOD feature from it
    z_ood = push(crossed[sel], np.asarray(y)[sel], anchors, tau, alpha, int(s["c"]), dev)
    return {"z": z_ood.numpy(), "y": np.asarray(y)[sel], "selected": sel, "steps": steps}


# ---- Dream-OOD: kNN boundary points + Gaussian noise + kNN rejection (scripts/KNN.py) ----------------------

def _kth_dist(q, ref, k):
    d = torch.cdist(q, ref)
    k = min(k, ref.shape[0])
    return d.topk(k, dim=1, largest=False).values[:, -1]


def dream_ood_features(z, y, cfg: dict, rng, n_out: int):
    """Per class: normalised ID features; the `select` with the largest k-th neighbour distance are the
    boundary points; around `pic_nums` of them draw `n_noise` Gaussian samples (std sigma), renormalise,
    and keep the `keep` samples per point with the largest k-th neighbour distance to the class."""
    s = cfg["dream_ood"]
    dev = P.device_of(cfg)
    z = F.normalize(P.place(torch.as_tensor(z, dtype=torch.float32), dev), dim=1)
    y = np.asarray(y)
    g = torch.Generator().manual_seed(int(rng.integers(2**31)))
    classes = np.unique(y)
    per_class = int(np.ceil(n_out / len(classes)))
    keep, sigma = int(s["keep"]), float(s["sigma"])
    outs, labs = [], []
    for c in classes:
        ID = z[P.place(torch.as_tensor(y == c), dev)]
        kd = _kth_dist(ID, ID, int(s["k"]) + 1)  # +1: the point itself is its own nearest neighbour
        bnd = ID[kd.topk(min(int(s["select"]), len(ID))).indices]
        got = []
        while sum(len(t) for t in got) < per_class:
            pick = rng.choice(len(bnd), min(int(s["pic_nums"]), len(bnd)), replace=False)
            pts = bnd[P.place(torch.as_tensor(pick), dev)]
            noise = P.place(torch.randn((len(pts), int(s["n_noise"]), z.shape[1]), generator=g), dev) * sigma
            cand = F.normalize(pts[:, None] + noise, dim=2)
            kd_c = _kth_dist(cand.reshape(-1, z.shape[1]), ID, int(s["k"])).view(len(pts), -1)
            idx = kd_c.topk(keep, dim=1).indices
            got.append(torch.gather(cand, 1, idx[..., None].expand(-1, -1, z.shape[1])).reshape(-1, z.shape[1]))
        outs.append(torch.cat(got)[:per_class])
        labs.append(np.full(per_class, c))
    return {"z": torch.cat(outs).cpu().numpy(), "y": np.concatenate(labs)}


# ---- NPOS: non-parametric outliers in the penultimate space of the classifier being trained ---------------

def npos_outliers(feats: torch.Tensor, labels: torch.Tensor, cfg: dict, gen: torch.Generator) -> torch.Tensor:
    """Boundary ID embeddings (largest k-th neighbour distance within their class, on the unit sphere),
    Gaussian samples around them, kept where their k-th neighbour distance to the ID embeddings is largest."""
    s = cfg["npos"]
    dev = P.device_of(cfg)  # where the model being trained (and feats) are
    f = F.normalize(feats.detach(), dim=1)
    out = []
    for c in labels.unique():
        ID = f[labels == c]
        if len(ID) <= int(s["k"]) + 1:
            continue
        kd = _kth_dist(ID, ID, int(s["k"]) + 1)
        bnd = ID[kd.topk(min(int(s["select"]), len(ID))).indices]
        # drawn on the host with the training loop's generator (the same draws on every device), then moved
        noise = P.place(torch.randn((len(bnd), int(s["n_noise"]), f.shape[1]), generator=gen), dev)
        cand = F.normalize(bnd[:, None] + float(s["sigma"]) * noise, dim=2).reshape(-1, f.shape[1])
        kd_c = _kth_dist(cand, ID, int(s["k"]))
        out.append(cand[kd_c.topk(min(int(s["keep"]), len(cand))).indices])
    return torch.cat(out) if out else f[:0]
