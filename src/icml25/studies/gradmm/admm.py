"""GRADMM's ADMM over continuous embeddings x and discrete tokens z (official generate.py, opt_alg 'admm',
conversion_method 'topk'), and the embedding-only matching baseline (opt_alg 'adam' + nearest-token map).

Shapes: G independent groups (the official `n_gen` batches, run side by side here) of B sequences
(`gen_bs`) of L tokens; the last P tokens of every sequence are the prompt " It was", fixed.

  z-step   z = Proj(x + lambda / rho): per free position, the top-k vocabulary tokens closest in cosine
           (banned tokens excluded); among them the one the LM ranks highest given the prefix decoded so
           far (greedy LM-constrained decoding, `project`); the prompt tokens are then re-fixed.
  x-step   K Adam steps on D(grad(x), g) + rho/2 ||x - z + lambda / rho||^2 (sum over elements), the
           gradient of the prompt positions zeroed, the gradient norm clipped per group (`grad_clip`).
  l-step   lambda <- lambda + rho (x - z).
The best x (lowest total loss of its last inner step, over outer iterations) is projected at the end.
"""
from __future__ import annotations

import numpy as np

from . import matching as M


class Matcher:
    """The matching problem of one class: model (lm_head only trainable), target gradient, banned tokens."""

    def __init__(self, model, task, target, label_id: int, banned: np.ndarray, prefix: list[int]):
        import torch

        self.model = model
        self.task = task
        self.target = [t.detach() for t in target]
        self.label_id = int(label_id)
        self.E = model.get_input_embeddings().weight.detach()
        self.En = self.E / self.E.norm(dim=1, keepdim=True).clamp_min(1e-12)
        self.device = self.E.device
        banned = np.asarray(banned[: self.E.shape[0]], dtype=bool)
        if len(banned) < self.E.shape[0]:
            banned = np.concatenate([banned, np.ones(self.E.shape[0] - len(banned), dtype=bool)])
        self.banned = torch.as_tensor(banned, device=self.device)
        self.prompt_ids = torch.tensor(task.prompt_ids, device=self.device)
        self.P = len(task.prompt_ids)
        self.prompt_emb = self.E[self.prompt_ids]
        self.prefix = list(prefix)

    # -- losses --
    def rec_loss(self, x):
        """D(grad l(x), g) per group: x (G, B, L, d) -> (G,)."""
        G, B, L, d = x.shape
        h = M.last_hidden(self.model, x.reshape(G * B, L, d)).reshape(G, B, -1)
        return M.cos_distance(M.closed_form_head_grad(self.model, h, self.label_id), self.target)

    def rec_loss_ids(self, ids):
        import torch

        with torch.no_grad():
            return self.rec_loss(self.E[ids])

    # -- the projection --
    def topk(self, v, k: int):
        """(N, L, k) ids of the k allowed tokens closest in cosine to each row of v (N, L, d)."""
        import torch

        vn = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        cos = vn @ self.En.T
        cos[..., self.banned] = -float("inf")
        return torch.topk(cos, k=min(int(k), int((~self.banned).sum())), dim=-1).indices

    def project(self, v, k: int, lm_guided: bool = True):
        """Token ids (N, L) for embeddings v (N, L, d): LM-guided top-k (official get_topk_closest_tokens) or,
        with lm_guided False, the nearest allowed token in cosine (get_closest_tokens, metric 'cos')."""
        import torch

        N, L, _ = v.shape
        free = L - self.P
        with torch.no_grad():
            cand = self.topk(v[:, :free], k if lm_guided else 1)
            ids = torch.empty((N, L), dtype=torch.long, device=self.device)
            ids[:, free:] = self.prompt_ids
            if not lm_guided:
                ids[:, :free] = cand[..., 0]
                return ids
            inp = torch.tensor([self.prefix] * N, dtype=torch.long, device=self.device)
            past = None
            for i in range(free):
                out = self.model(input_ids=inp, past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[:, -1, :]
                c = cand[:, i, :]
                pick = c.gather(1, logits.gather(1, c).argmax(dim=1, keepdim=True))
                ids[:, i] = pick[:, 0]
                inp = pick
        return ids

    # -- initialisation (official init.py, random_normal) --
    def init(self, G: int, B: int, L: int, n_candidates: int, init_size: float, generator):
        """Best of n_candidates N(0, 1) draws per group by D (prompt embeddings in place), each token then
        rescaled to norm init_size. The draws come from the host generator (the same on every device)."""
        import torch

        d = self.E.shape[1]
        best = torch.empty((G, B, L, d), device=self.device)
        best_loss = torch.full((G,), float("inf"), device=self.device)
        with torch.no_grad():
            for _ in range(int(n_candidates)):
                x = torch.randn((G, B, L, d), generator=generator).to(self.device)
                x[:, :, -self.P:] = self.prompt_emb
                loss = self.rec_loss(x)
                better = loss < best_loss
                best[better] = x[better]
                best_loss = torch.where(better, loss, best_loss)
            if init_size > 0:
                best = best / best.norm(dim=-1, keepdim=True) * init_size
        return best


def lambda_step(lam, x, z, rho: float):
    """lambda <- lambda + rho (x - z) (in place; returned for convenience)."""
    lam.add_(rho * (x.detach() - z))
    return lam


def _clip_per_group(grad, max_norm: float | None):
    import torch

    if max_norm is None:
        return
    n = grad.flatten(1).norm(dim=1)
    f = torch.where(n > max_norm, max_norm / (n + 1e-6), torch.ones_like(n))
    grad.mul_(f.view(-1, *([1] * (grad.dim() - 1))))


def run_admm(matcher: Matcher, G: int, B: int, L: int, cfg: dict, generator, trace: bool = False,
             x0=None) -> dict:
    """GRADMM for one class. cfg: outer, inner, rho, lr, lr_decay, topk, grad_clip, init_candidates,
    init_size. Returns ids (G, B, L), the per-iteration gradient cosine of the projected x, and (trace)
    the lambda / x / z of every outer iteration."""
    import torch

    rho, P = float(cfg["rho"]), matcher.P
    x = (x0.clone() if x0 is not None else
         matcher.init(G, B, L, cfg["init_candidates"], float(cfg["init_size"]), generator)).requires_grad_(True)
    lam = torch.zeros_like(x.detach())
    opt = torch.optim.Adam([x], lr=float(cfg["lr"]))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=float(cfg["lr_decay"]))
    best_err = torch.full((G,), float("inf"), device=matcher.device)
    best_x = x.detach().clone()
    flat = lambda t: t.reshape(G * B, L, -1)  # noqa: E731
    cos_curve = [float((1 - matcher.rec_loss_ids(matcher.project(flat(x.detach()), cfg["topk"]).view(G, B, L))).mean())]
    steps = []
    for it in range(int(cfg["outer"])):
        with torch.no_grad():
            x[:, :, -P:] = matcher.prompt_emb
        # z-step
        z_ids = matcher.project(flat(x.detach() + lam / rho), cfg["topk"]).view(G, B, L)
        z = matcher.E[z_ids]
        # x-step
        for _ in range(int(cfg["inner"])):
            opt.zero_grad(set_to_none=True)
            rec = matcher.rec_loss(x)
            pen = (x - z + lam / rho).square().flatten(1).sum(1)
            tot = rec + (rho / 2) * pen
            tot.sum().backward()
            x.grad[:, :, -P:] = 0.0
            _clip_per_group(x.grad, cfg.get("grad_clip"))
            err = tot.detach()
            opt.step()
        # lambda-step
        lam_before = lam.clone() if trace else None
        lambda_step(lam, x, z, rho)
        with torch.no_grad():
            x[:, :, -P:] = matcher.prompt_emb
            better = err <= best_err
            best_x[better] = x.detach()[better]
            best_err = torch.where(better, err, best_err)
        sched.step()
        proj = matcher.project(flat(x.detach()), cfg["topk"]).view(G, B, L)
        proj_loss = matcher.rec_loss_ids(proj)
        cos_curve.append(float((1 - proj_loss).mean()))
        if trace:
            steps.append({"lam_before": lam_before, "lam_after": lam.clone(), "x": x.detach().clone(),
                          "z": z.clone(), "z_ids": z_ids.clone()})
    if int(cfg["outer"]) > 0 and torch.equal(best_x, x.detach()):
        ids, final = proj, proj_loss  # the best x is the last one: its projection is already computed
    else:
        ids = matcher.project(flat(best_x), cfg["topk"]).view(G, B, L)
        final = matcher.rec_loss_ids(ids)
    return {"ids": ids, "cos_curve": cos_curve, "final_cos": float((1 - final).mean()), "trace": steps}


def run_embedding_only(matcher: Matcher, G: int, B: int, L: int, cfg: dict, generator) -> dict:
    """The unreadable baseline: Adam on D(grad(x), g) alone for outer x inner steps (the same number of
    gradient steps as GRADMM), no z / lambda; the best x mapped to the nearest allowed token in cosine."""
    import torch

    P = matcher.P
    x = matcher.init(G, B, L, cfg["init_candidates"], float(cfg["init_size"]), generator).requires_grad_(True)
    opt = torch.optim.Adam([x], lr=float(cfg["lr"]))
    best_err = torch.full((G,), float("inf"), device=matcher.device)
    best_x = x.detach().clone()
    flat = lambda t: t.reshape(G * B, L, -1)  # noqa: E731
    nearest = lambda t: matcher.project(flat(t), 1, lm_guided=False).view(G, B, L)  # noqa: E731
    cos_curve = [float((1 - matcher.rec_loss_ids(nearest(x.detach()))).mean())]
    for it in range(int(cfg["outer"])):
        for _ in range(int(cfg["inner"])):
            opt.zero_grad(set_to_none=True)
            rec = matcher.rec_loss(x)
            rec.sum().backward()
            x.grad[:, :, -P:] = 0.0
            _clip_per_group(x.grad, cfg.get("grad_clip"))
            err = rec.detach()
            opt.step()
            with torch.no_grad():
                x[:, :, -P:] = matcher.prompt_emb
                better = err <= best_err
                best_x[better] = x.detach()[better]
                best_err = torch.where(better, err, best_err)
        near = nearest(x.detach())
        near_loss = matcher.rec_loss_ids(near)
        cos_curve.append(float((1 - near_loss).mean()))
    if int(cfg["outer"]) > 0 and int(cfg["inner"]) > 0 and torch.equal(best_x, x.detach()):
        ids, final = near, near_loss  # the best x is the last one: its token map is already scored
    else:
        ids = nearest(best_x)
        final = matcher.rec_loss_ids(ids)
    return {"ids": ids, "cos_curve": cos_curve, "final_cos": float((1 - final).mean()),
            "embed_cos": float((1 - best_err).mean())}
