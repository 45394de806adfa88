"""The two other learned-mixture baselines of the paper's comparison, computed once in fit_base.

DoGE (Fan, Pagliardini & Jaggi 2023; official code Olivia-fsm/DoGE, `DoGETrainer.update_domain_weights_distributed`,
universal generalisation, i.e. target = the mix of all training domains):
  every step, per-domain gradient g_i of the proxy's mean loss on that domain's windows (each clipped to
  max_grad_norm); score_i = lr_t * sum_{j != i} <g_i, g_j> / mean_i ||g_i||, clipped to [lr_t dw_min, lr_t dw_max];
  alpha <- softmax(log alpha + score / mu), alpha <- (1 - eps) alpha + eps / k; the proxy steps with
  sum_i alpha_i g_i; the base model uses the time-averaged alpha. Defaults as config/doge.json: mu 0.01,
  dw_min 0, dw_max 5, eps 0. Batches are stratified (the same number of windows from every domain each step), the
  expectation of the official domain-uniform sampling, so that every domain has a gradient at every step.

RegMix-lite (Liu et al. 2024; official code sail-sg/regmix): tiny proxies trained on Dirichlet-sampled mixtures
(`synthesize_mixture.py`: prior = token distribution ** 0.5, strength drawn from logspace(0.1, 5, 15)), a
regression from mixture weights to the held-out validation loss, and the final mixture = the mean of the top-k
(k = 100 in the paper) of many Dirichlet samples ranked by the predicted loss. "Lite": a linear regression
(least squares on the weights, which span the intercept on the simplex) instead of LightGBM, a handful of runs
instead of 512, no per-domain usage bound, and the target is the unweighted mean of the per-domain validation
losses (our avg-PPL metric). Validation = the last val_frac of each domain's training tokens, which the RegMix
proxies do not train on; the test blocks are never touched.
"""
from __future__ import annotations

import math

import numpy as np

from . import lm


# ---- DoGE ---------------------------------------------------------------------------------------------

def doge_scores(G, lr_t: float, dw_min: float = 0.0, dw_max: float = 5.0):
    """G: (k, P) flattened per-domain gradients. Official DoGE scores (train domains = target domains)."""
    import torch

    M = G @ G.T
    s = lr_t * (M.sum(dim=-1) - M.diag())
    s = s / (G.norm(dim=-1).mean() + 1e-6)
    return torch.clip(s, min=lr_t * dw_min, max=lr_t * dw_max)


def doge_step(alpha, G, lr_t: float, mu: float = 0.01, dw_min: float = 0.0, dw_max: float = 5.0, eps: float = 0.0):
    """One DoGE domain-weight update: alpha <- softmax(log alpha + scores / mu), smoothed by eps."""
    import torch

    s = doge_scores(G, lr_t, dw_min, dw_max).double()
    new = torch.softmax(torch.log(alpha.double()) + s / mu, dim=-1)
    return (1 - eps) * new + eps / len(new), s


def train_doge(model, arrays: list[np.ndarray], n_tokens: int, hp: dict, dcfg: dict, seed: int,
               log_every: int = 10) -> dict:
    """DoGE proxy training; returns the time-averaged weights, loss curves and 6 N D FLOPs."""
    import torch

    k, ctx = len(arrays), int(hp["ctx"])
    per = int(dcfg.get("per_domain_batch", 2))
    mu, eps = float(dcfg.get("mu", 0.01)), float(dcfg.get("eps", 0.0))
    dw_min, dw_max = float(dcfg.get("dw_min", 0.0)), float(dcfg.get("dw_max", 5.0))
    clip = float(dcfg.get("max_grad_norm", 1.0))
    steps = max(1, int(n_tokens) // (ctx * per * k))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=float(hp["lr"]), betas=(0.9, 0.95), weight_decay=float(hp["wd"]))
    alpha = torch.full((k,), 1.0 / k, dtype=torch.float64)
    alpha_sum = torch.zeros(k, dtype=torch.float64)
    model.train()
    curves = []
    for step in range(steps):
        lr_t = lm._lr(step, steps, float(hp["lr"]), float(hp["warmup"]))
        for g in opt.param_groups:
            g["lr"] = lr_t
        grads, losses = [], []
        for i in range(k):
            x, _ = lm.sample_batch([arrays[i]], np.ones(1), rng, per, ctx)
            loss = lm.token_losses(model, x).mean()
            gi = torch.autograd.grad(loss, params)
            flat = torch.cat([g.reshape(-1) for g in gi])
            norm = float(flat.norm())
            if clip > 0 and norm > clip:
                flat = flat * (clip / (norm + 1e-6))
            grads.append(flat)
            losses.append(float(loss.detach()))
        G = torch.stack(grads)
        alpha, _ = doge_step(alpha, G, lr_t, mu, dw_min, dw_max, eps)
        alpha_sum += alpha
        combined = (alpha.to(G.dtype)[:, None] * G).sum(0)
        off = 0
        for p in params:
            n = p.numel()
            p.grad = combined[off:off + n].view_as(p).clone()
            off += n
        torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % log_every == 0 or step == steps - 1:
            curves.append({"step": step, "value": float(np.mean(losses))})
    model.eval()
    tokens = steps * per * k * ctx
    return {"weights": (alpha_sum / steps).numpy(), "curves": curves, "tokens": tokens, "steps": steps,
            "flops": 6.0 * lm.n_params(model) * tokens}


# ---- RegMix-lite --------------------------------------------------------------------------------------

def dirichlet_mixtures(prior, n: int, rng: np.random.Generator, temperature: float = 0.5,
                       min_strength: float = 0.1, max_strength: float = 5.0, n_strengths: int = 15) -> np.ndarray:
    """n mixtures as RegMix's synthesize_mixture.py: Dirichlet(prior ** temperature * strength), strength drawn
    from logspace(min, max, n_strengths). Degenerate draws (all-zero from underflow) are redrawn."""
    p = np.asarray(prior, dtype=np.float64) ** temperature
    p = p / p.sum()
    strengths = np.logspace(np.log10(min_strength), np.log10(max_strength), n_strengths)
    out = np.empty((n, len(p)))
    for r in range(n):
        while True:
            w = rng.dirichlet(p * strengths[rng.integers(len(strengths))])
            if np.all(np.isfinite(w)) and w.sum() > 0:
                out[r] = w / w.sum()
                break
    return out


def fit_linear(W: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares (minimum-norm) linear model y ~ W c. On the simplex sum(w) = 1 the weights span the
    intercept, so no separate bias is fitted."""
    c, *_ = np.linalg.lstsq(np.asarray(W, dtype=np.float64), np.asarray(y, dtype=np.float64), rcond=None)
    return c


def search_mixture(coef: np.ndarray, prior, rng: np.random.Generator, n_search: int, top_k: int, **dkw) -> dict:
    """RegMix's search: many Dirichlet samples ranked by predicted loss; the mixture is the mean of the top_k."""
    S = dirichlet_mixtures(prior, int(n_search), rng, **dkw)
    pred = S @ coef
    top = np.argsort(pred)[: max(1, int(top_k))]
    w = S[top].mean(axis=0)
    return {"weights": w / w.sum(), "predicted_loss": float(w @ coef), "best_sample_loss": float(pred[top[0]])}


def eval_tokens(n_ids: int, ctx: int, max_windows: int) -> int:
    """Tokens scored by lm.perplexity (for the 2 N D forward FLOPs)."""
    return min((n_ids - 1) // ctx, max_windows) * ctx


def split_validation(arrays: list[np.ndarray], frac: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(fit, val): val = the last `frac` of each domain's training tokens."""
    cuts = [int(len(a) * (1 - frac)) for a in arrays]
    return [a[:c] for a, c in zip(arrays, cuts)], [a[c:] for a, c in zip(arrays, cuts)]


def _dirichlet_kw(rcfg: dict) -> dict:
    return {k: rcfg[k] for k in ("temperature", "min_strength", "max_strength") if k in rcfg}


def regmix_design(prior, rcfg: dict, seed: int) -> tuple[np.ndarray, np.random.Generator]:
    """The runs' mixtures and the generator that continues into the search (so the split is bit-identical)."""
    rng = np.random.default_rng([int(seed), 7919])
    return dirichlet_mixtures(prior, int(rcfg["runs"]), rng, **_dirichlet_kw(rcfg)), rng


def regmix_run(mcfg: dict, vocab: int, arrays: list[np.ndarray], w, hp: dict, rcfg: dict, run_seed: int) -> dict:
    """One tiny proxy on mixture w: per-domain validation log-perplexity, FLOPs (training + scoring), curve."""
    ctx, nw = int(hp["ctx"]), int(rcfg.get("val_windows", 20))
    fit, val = split_validation(arrays, float(rcfg.get("val_frac", 0.1)))
    model = lm.build(mcfg, vocab, run_seed)
    res = lm.train(model, fit, w, int(rcfg["tokens"]), hp, run_seed)
    n = lm.n_params(model)
    return {"val_losses": [math.log(lm.perplexity(model, v, ctx, nw)) for v in val],
            "flops": res["flops"] + 2.0 * n * sum(eval_tokens(len(v), ctx, nw) for v in val),
            "curves": res["curves"]}


def regmix_fit(W: np.ndarray, runs: list[dict], prior, rng: np.random.Generator, rcfg: dict) -> dict:
    """Linear fit of the mean validation loss on the mixtures, then RegMix's top-k search."""
    L = np.asarray([r["val_losses"] for r in runs])
    y = L.mean(axis=1)
    coef = fit_linear(W, y)
    pred = W @ coef
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else float("nan")
    found = search_mixture(coef, prior, rng, int(rcfg.get("n_search", 100000)), int(rcfg.get("top_k", 100)),
                           **_dirichlet_kw(rcfg))
    return {"weights": found["weights"], "mixtures": W, "val_losses": L, "target": y, "coef": coef, "train_r2": r2,
            "predicted_loss": found["predicted_loss"], "flops": float(sum(r["flops"] for r in runs)),
            "curves": [{"run": i, **c} for i, r in enumerate(runs) for c in r["curves"]]}


def regmix(mcfg: dict, vocab: int, arrays: list[np.ndarray], prior, hp: dict, rcfg: dict, seed: int) -> dict:
    """RegMix-lite in one process: proxies on Dirichlet mixtures -> mean validation loss -> linear fit -> top-k
    search. (fit_base runs the same three steps with the runs spread over its cores.)"""
    W, rng = regmix_design(prior, rcfg, seed)
    runs = [regmix_run(mcfg, vocab, arrays, w, hp, rcfg, seed + 100 + r) for r, w in enumerate(W)]
    return regmix_fit(W, runs, prior, rng, rcfg)
