"""Unlearning objectives on token losses l [B, T] (0 off the mask), mask [B, T] and importance [B, T].

Token-reweighted gradient ascent (the paper's family), weights w detached, each with the official code's
reduction (tmlr-group/SatImp, dataloader_sat/_granu/_imp/_hardsampling.py):
    GA      w = 1                           token mean   -(1/|T|) sum_t w_t l_t over the batch's answer tokens
    SimSat  w = p^beta                      token mean   (saturation; = WGA)
    SimImp  w = (1 - p)^beta                token mean   (importance)
    SatImp  w = p^beta1 (1 - p)^beta2       token mean   (the paper's method; beta1 = 5, beta2 = 0.1)
    group   SimSat's token weights sorted within an answer and averaged in groups of G; token mean
    instance w_i = p(y_i|x_i)^beta = exp(-beta sum_t l_t)      answer mean  -(1/B) sum_i w_i sum_t l_it
    batch   w = mean_i w_i                                     answer mean
    ImpT    w = annotated fact token (0/1)                     batch sum    -sum_it w_it l_it (unnormalised)
    TopK    w = 1 where l > quantile_{1-q}(l of the answer)    batch sum
    BottomK w = 1 where l < quantile_{1-q}(l of the answer)    batch sum    (the official rule: at q = 0.3 the
            bottom 70% of each answer's tokens; the quantile is over the answer's tokens with l > 0)
NPO  = -(2/beta) mean_i log sigmoid(-beta (sum_t l_t - sum_t l_t^ref)),
SimNPO = -(2/beta) mean_i log sigmoid(beta mean_t l_t - gamma).
"""
from __future__ import annotations

# the official reduction of each weighting (see the module docstring)
REDUCTION = {"ga": "token_mean", "simsat": "token_mean", "simimp": "token_mean", "satimp": "token_mean",
             "simsat_group": "token_mean", "simsat_instance": "answer_mean", "simsat_batch": "answer_mean",
             "impt": "sum", "topk": "sum", "bottomk": "sum"}


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
    """The official ga_topk / ga_bottomk masks: per answer, the threshold is the (1 - q) quantile (linear
    interpolation, torch.quantile) of its token losses that are > 0; TopK keeps l > threshold (the top q
    share), BottomK keeps l < threshold (the bottom 1 - q share: 70% at q = 0.3). An answer whose losses are
    all 0 gets threshold +inf (TopK keeps nothing, BottomK every token, whose loss is 0)."""
    import torch

    sel = torch.zeros_like(l)
    for i in range(l.shape[0]):
        row = l[i][mask[i].bool()]
        nz = row[row > 0]
        thr = torch.quantile(nz, 1 - q) if len(nz) else torch.tensor(float("inf"))
        keep = (l[i] > thr) if top else (l[i] < thr)
        sel[i] = (keep & mask[i].bool()).float()
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


def reweighted_ga(l, mask, w, reduction: str = "token_mean"):
    """L_f = -sum w l (w detached), reduced as the official code does: `token_mean` divides by the batch's
    answer-token count, `answer_mean` by the number of answers (per-answer sums averaged over answers),
    `sum` not at all."""
    total = -(w.detach() * l).sum()
    if reduction == "token_mean":
        return total / mask.sum()
    if reduction == "answer_mean":
        return total / l.shape[0]
    if reduction == "sum":
        return total
    raise KeyError(reduction)


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
