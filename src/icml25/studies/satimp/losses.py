"""Unlearning objectives on token losses l [B, T] (0 off the mask), mask [B, T] and importance [B, T].

Token-reweighted gradient ascent (the paper's family): L_f = -(1/|T|) sum_t w_t l_t with w detached:
    GA      w = 1
    SimSat  w = p^beta                      (saturation; = WGA)
    SimImp  w = (1 - p)^beta                (importance)
    SatImp  w = p^beta1 (1 - p)^beta2       (the paper's method; beta1 = 5, beta2 = 0.1)
    ImpT    w = annotated fact token (0/1)  (importance from annotations)
    TopK    w = 1 on the q-share of highest-loss tokens of each answer; BottomK the q-share of lowest-loss
Granularity variants of SimSat (official forget_granu.py): instance w_i = p(y_i|x_i)^beta = exp(-beta sum_t l_t),
batch w = mean_i w_i, group = token weights sorted within an answer and averaged in groups of G.
NPO  = -(2/beta) mean_i log sigmoid(-beta (sum_t l_t - sum_t l_t^ref)),
SimNPO = -(2/beta) mean_i log sigmoid(beta mean_t l_t - gamma).
"""
from __future__ import annotations


def _p(l):
    import torch

    return torch.exp(-l.detach())


def token_weights(kind: str, l, mask, importance, hp: dict):
    """Detached per-token weights of a token-reweighted objective (0 off the mask)."""
    import torch

    p = _p(l)
    m = mask.float()
    if kind == "ga":
        w = torch.ones_like(p)
    elif kind == "simsat":
        w = p ** float(hp["beta"])
    elif kind == "simimp":
        w = (1 - p) ** float(hp["beta"])
    elif kind == "satimp":
        w = p ** float(hp["beta1"]) * (1 - p) ** float(hp["beta2"])
    elif kind == "impt":
        w = importance.float()
    elif kind in ("topk", "bottomk"):
        w = hard_selection(l.detach(), mask, float(hp["q"]), top=kind == "topk")
    elif kind == "simsat_instance":
        w = torch.exp(-float(hp["beta"]) * (l.detach() * m).sum(1, keepdim=True)).expand_as(p)
    elif kind == "simsat_batch":
        wi = torch.exp(-float(hp["beta"]) * (l.detach() * m).sum(1))
        w = wi.mean().expand_as(p)
    elif kind == "simsat_group":
        w = group_average(p ** float(hp["beta"]), mask, int(hp["group"]))
    else:
        raise KeyError(kind)
    return (w * m).detach()


def hard_selection(l, mask, q: float, top: bool):
    """1 on the ceil(q n) highest-loss (top) or lowest-loss (bottom) answer tokens of each sequence."""
    import math

    import torch

    sel = torch.zeros_like(l)
    for i in range(l.shape[0]):
        pos = torch.nonzero(mask[i]).flatten()
        if len(pos) == 0:
            continue
        k = max(1, math.ceil(q * len(pos)))
        order = torch.argsort(l[i, pos], descending=top, stable=True)
        sel[i, pos[order[:k]]] = 1.0
    return sel


def group_average(w, mask, group: int):
    """Token weights sorted (descending) within each sequence and replaced by their group means."""
    import torch

    out = torch.zeros_like(w)
    for i in range(w.shape[0]):
        pos = torch.nonzero(mask[i]).flatten()
        vals, order = torch.sort(w[i, pos], descending=True, stable=True)
        for s in range(0, len(pos), group):
            out[i, pos[order[s:s + group]]] = vals[s:s + group].mean()
    return out


def reweighted_ga(l, mask, w):
    """L_f = -(1/|T|) sum w l over the answer tokens of the batch (w detached)."""
    return -(w.detach() * l).sum() / mask.sum()


def npo(l, mask, l_ref, beta: float):
    import torch.nn.functional as F

    m = mask.float()
    ratio = (l * m).sum(1) - (l_ref * m).sum(1)  # -log(pi_theta / pi_ref) of each answer
    return -(2.0 / beta) * F.logsigmoid(beta * ratio).mean()


def simnpo(l, mask, beta: float, gamma: float):
    import torch.nn.functional as F

    m = mask.float()
    mean_nll = (l * m).sum(1) / m.sum(1)
    return -(2.0 / beta) * F.logsigmoid(beta * mean_nll - gamma).mean()


def nll(l, mask):
    return l.sum() / mask.sum()
