"""DQN (discrete, mini primary) and SAC (continuous, mini secondary and full) with SimBa-lite networks,
dense or one-shot ERK-sparse, plus the paper's diagnostics, sampled during training (every `diag_every` env
steps) and at its end."""
from __future__ import annotations

import copy
import math
import time

import numpy as np

from . import diagnostics as D
from .envs import make_env
from .nets import RunningNorm, build_simba
from .sparse import Masker, count_params, masked_step

MASK_SEED_OFFSET = 7919  # masks come from their own generator: seed + offset


# ---- shared pieces ------------------------------------------------------------------------------------

class Replay:
    def __init__(self, cap, obs_dim, act_shape, act_dtype):
        self.obs = np.zeros((cap, obs_dim), np.float32)
        self.nobs = np.zeros((cap, obs_dim), np.float32)
        self.act = np.zeros((cap, *act_shape), act_dtype)
        self.rew = np.zeros(cap, np.float32)
        self.done = np.zeros(cap, np.float32)
        self.cap, self.n, self.i = cap, 0, 0

    def add(self, o, a, r, no, d):
        self.obs[self.i], self.act[self.i], self.rew[self.i], self.nobs[self.i], self.done[self.i] = o, a, r, no, d
        self.i = (self.i + 1) % self.cap
        self.n = min(self.n + 1, self.cap)

    def sample(self, rng, b):
        idx = rng.integers(0, self.n, b)
        return self.obs[idx], self.act[idx], self.rew[idx], self.nobs[idx], self.done[idx]


def polyak(target, source, tau):
    import torch

    with torch.no_grad():
        tp, sp = list(target.parameters()), list(source.parameters())
        torch._foreach_mul_(tp, 1.0 - tau)
        torch._foreach_add_(tp, sp, alpha=tau)


def _step(opt, maskers):
    if maskers:
        masked_step(opt, maskers)
    else:
        opt.step()


def _norm_cat(norm, obs, act=None, dev="cpu"):
    import torch

    x = torch.from_numpy(norm(obs))
    if act is not None:
        x = torch.cat([x, torch.as_tensor(act, dtype=torch.float32).reshape(len(obs), -1)], 1)
    return x.to(dev)


def _device(c):
    """`device`: cpu (default), cuda, or auto (cuda when available): the full scale runs on a GPU."""
    import torch

    want = c.get("device", "cpu")
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(want)


def _probe_fit(model, masks, x, y, c) -> float:
    """`probe_steps` masked AdamW steps of MSE regression of `model` onto y; the final loss."""
    import torch

    params = dict(model.named_parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=c["probe_lr"], weight_decay=c["weight_decay"], fused=True)
    for _ in range(c["probe_steps"]):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for n, m in (masks or {}).items():
            params[n].grad.mul_(m)
        opt.step()
        with torch.no_grad():
            for n, m in (masks or {}).items():
                params[n].mul_(m)
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(model(x), y))


def reset_probe(net, masker, sparsity, seed, x, c, builder) -> float:
    """Reset probe (plasticity): fit the trained network and a fully reset one (same width and sparsity, new
    init and new masks) to a new random regression target on the same inputs for `probe_steps` steps. The
    trained copy gets a freshly initialised head (its mask kept), so the probe measures how trainable the
    trained body is, not the scale of its old Q outputs. Returns final loss of the trained net / final loss
    of the reset net (> 1: training cost plasticity, a reset would help)."""
    import torch

    g = torch.Generator().manual_seed(seed + 31)
    w = torch.randn(x.shape[1], net.head.out_features, generator=g).to(x.device)
    y = torch.sin(x @ w)  # a fixed smooth random function of the inputs
    torch.manual_seed(seed + 37)
    fresh = builder().to(x.device)
    trained = copy.deepcopy(net)
    with torch.no_grad():
        trained.head.weight.copy_(fresh.head.weight)
        trained.head.bias.copy_(fresh.head.bias)
    masks = masker.masks if masker else None
    if masks and "head.weight" in masks:
        with torch.no_grad():
            trained.head.weight.mul_(masks["head.weight"])
    trained_loss = _probe_fit(trained, masks, x, y, c)
    fresh_masks = Masker(fresh, sparsity, seed + MASK_SEED_OFFSET + 1).masks if sparsity is not None else None
    fresh_loss = _probe_fit(fresh, fresh_masks, x, y, c)
    return trained_loss / max(fresh_loss, 1e-12)


def _log_eval(step, ret, evals, curves, losses, progress) -> None:
    """Record one evaluation (and the recent TD loss) as curve points."""
    evals.append((step, ret))
    curves.append(("eval_return", step, ret))
    if losses:
        curves.append(("td_loss", step, float(np.mean(losses[-200:]))))
    if progress:
        progress(step, ret)


def _finish(evals):
    """Return AUC (mean eval return over all checkpoints) and final return (last checkpoint)."""
    rets = [r for _, r in evals]
    return {"return_auc": float(np.mean(rets)), "final_return": float(rets[-1])}


DIAG_CURVES = ("dormant_ratio", "srank", "param_norm", "grad_interference", "td_interference", "grad_norm")


def _diagnose(net, masker, x, td_loss_i, n_interf, sparsity, seed, c, builder, actor=None, actor_loss_i=None,
              probe=True):
    """The paper's diagnostics of the scaled network `net` on the fixed batch `x` (see diagnostics.py):
    dormant ratio over every encoder layer's pre-activation outputs, Srank of the encoder output, parameter
    norm; grad_interference from per-sample actor-loss gradients when there is an actor (SAC, DDPG; the
    official definition), else (DQN) from per-sample TD gradients; td_interference: per-sample critic TD
    gradients (our earlier definition, kept as a second column); the reset probe (ours) when `probe`."""
    import torch

    rec = []
    with torch.no_grad():
        feats = net.features(x, rec)
    td = D.interference_from_gram(D.per_sample_gram(net, td_loss_i, n_interf))
    out = {
        "dormant_ratio": D.dormant_ratio([r.cpu().numpy() for r in rec], c["dormant_tau"]),
        "srank": float(D.srank(feats.cpu().numpy(), c["srank_delta"])),
        "param_norm": D.param_norm(net),
        "td_interference": td,
        "grad_interference": td,
    }
    if actor is not None:
        out["grad_interference"] = D.interference_from_gram(D.per_sample_gram(actor, actor_loss_i, n_interf))
        net.zero_grad(set_to_none=True)  # the actor loss backpropagated through the critic too
    if probe:
        out["reset_probe_ratio"] = reset_probe(net, masker, sparsity, seed, x, c, builder)
    return out


def _rng_kept(dev):
    """Diagnostics leave torch's global generator(s) as they found them, so training is the same with or
    without in-training diagnostic points."""
    import torch

    return torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else [])


def _diag_due(c, t) -> bool:
    """In-training diagnostic point after env step t+1: every `diag_every` steps (0: end of training only),
    once learning has started; the last step is covered by the end-of-training diagnostics."""
    k, step = int(c.get("diag_every", 0) or 0), t + 1
    return k > 0 and step % k == 0 and step >= c["learning_starts"] and step < c["total_steps"]


def _log_diag(step, diag, gnorms, since, curves) -> int:
    """Record the diagnostics (and the mean gradient norm of the updates since index `since`) as curve points;
    returns the new `since`."""
    diag["grad_norm"] = float(np.mean(gnorms[since:])) if len(gnorms) > since else float("nan")
    for k in DIAG_CURVES:
        curves.append((k, step, diag[k]))
    return len(gnorms)


# ---- DQN -------------------------------------------------------------------------------------------

def run_dqn(c: dict, width: int, sparsity, seed: int, progress=None) -> dict:
    import torch
    import torch.nn.functional as F

    t0 = time.process_time()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env, ev = make_env(c["env"], seed), make_env(c["env"], seed + 100_000)
    sp = env.spec
    dev = _device(c)
    builder = lambda: build_simba(sp.obs_dim, width, sp.n_actions, c["num_blocks"], c["expansion"])  # noqa: E731
    q = builder().to(dev)
    maskers = [Masker(q, sparsity, seed + MASK_SEED_OFFSET)] if sparsity is not None else []
    q_t = copy.deepcopy(q)
    for p in q_t.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(q.parameters(), lr=c["lr"], weight_decay=c["weight_decay"], fused=True)
    norm = RunningNorm(sp.obs_dim)
    buf = Replay(c["total_steps"], sp.obs_dim, (), np.int64)
    gamma, batch = c["gamma"], c["batch_size"]

    def td_loss(o, a, r, no, d, reduce=True):
        with torch.no_grad():
            y = (torch.from_numpy(r).to(dev) + gamma * (1 - torch.from_numpy(d).to(dev))
                 * q_t(_norm_cat(norm, no, dev=dev)).max(1).values)
        qa = q(_norm_cat(norm, o, dev=dev)).gather(1, torch.from_numpy(a).view(-1, 1).to(dev)).squeeze(1)
        return F.smooth_l1_loss(qa, y, reduction="mean" if reduce else "none")

    def greedy(o):
        with torch.no_grad():
            return int(q(_norm_cat(norm, o[None], dev=dev)).argmax(1).item())

    def evaluate(n_ep):
        rets = []
        for _ in range(n_ep):
            o, done, tot = ev.reset(), False, 0.0
            while not done:
                o, r, term, trunc = ev.step(greedy(o))
                tot += r
                done = term or trunc
            rets.append(tot)
        return float(np.mean(rets))

    def diagnose(dseed, probe):
        """Diagnostics on a replay batch drawn from its own generator (the training RNGs are not touched)."""
        o, a, r, no, d = buf.sample(np.random.default_rng(dseed), c["diag_batch"])
        x = _norm_cat(norm, o, dev=dev)
        with _rng_kept(dev):
            return _diagnose(q, maskers[0] if maskers else None, x,
                             lambda i: td_loss(o[i:i + 1], a[i:i + 1], r[i:i + 1], no[i:i + 1], d[i:i + 1]),
                             c["interference_samples"], sparsity, seed, c, builder, probe=probe)

    curves, evals, losses, gnorms, credit, since = [], [], [], [], 0.0, 0
    obs = env.reset()
    norm.update(obs)
    for t in range(c["total_steps"]):
        frac = min(1.0, t / max(1, c["eps_decay_steps"]))
        eps = c["eps_start"] + frac * (c["eps_end"] - c["eps_start"])
        a = int(rng.integers(sp.n_actions)) if rng.random() < eps else greedy(obs)
        nobs, r, term, trunc = env.step(a)
        buf.add(obs, a, r, nobs, float(term))
        norm.update(nobs)
        obs = nobs
        if term or trunc:
            obs = env.reset()
            norm.update(obs)
        if t + 1 >= c["learning_starts"]:
            credit += c["replay_ratio"]
            while credit >= 1.0:
                credit -= 1.0
                loss = td_loss(*buf.sample(rng, batch))
                opt.zero_grad()
                loss.backward()
                _step(opt, maskers)
                gnorms.append(D.grad_norm(q))
                polyak(q_t, q, c["target_tau"])
                losses.append(loss.item())
        if (t + 1) % c["eval_every"] == 0:
            _log_eval(t + 1, evaluate(c["eval_episodes"]), evals, curves, losses, progress)
        if _diag_due(c, t):
            since = _log_diag(t + 1, diagnose(seed + 2 + t, probe=False), gnorms, since, curves)
    res = _finish(evals)
    # end-of-training diagnostics on a fixed replay batch (these feed the table and the claims)
    end = diagnose(seed + 1, probe=True)
    _log_diag(c["total_steps"], end, gnorms, since, curves)
    res.update(end)
    res["active_params"] = maskers[0].active_params() if maskers else count_params(q)
    res["total_params"] = count_params(q)
    res["cpu_seconds"] = time.process_time() - t0
    return {"metrics": res, "curves": curves, "losses": losses, "net": q, "maskers": maskers, "opt": opt}


# ---- SAC -------------------------------------------------------------------------------------------

def run_sac(c: dict, width: int, sparsity, seed: int, progress=None, kind: str = "sac") -> dict:
    """SAC as the official SimBa/SparseNetwork4DRL config: AdamW (lr 1e-4, wd 1e-2) for actor and critic,
    temperature init 0.01 with target entropy -0.5 |A|, tau 0.005, UTD `replay_ratio`; the critic's width is
    the swept width, the actor has a fixed width; both are pruned at the same sparsity.
    kind="ddpg": the same networks and loop with a deterministic tanh actor, Gaussian exploration noise
    (`explore_std`), a Polyak target actor for the critic target, and no entropy term."""
    ddpg = kind == "ddpg"
    import torch

    t0 = time.process_time()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = make_env(c["env"], seed, c.get("action_repeat", 1))
    ev = make_env(c["env"], seed + 100_000, c.get("action_repeat", 1))
    sp = env.spec
    A = sp.act_dim
    nq = 2 if c["use_cdq"] else 1
    dev = _device(c)
    builder = lambda: build_simba(sp.obs_dim + A, width, nq, c["critic_blocks"], c["expansion"])  # noqa: E731
    actor = build_simba(sp.obs_dim, c["actor_width"], (1 if ddpg else 2) * A, c["actor_blocks"], c["expansion"]).to(dev)
    critic = builder().to(dev)
    actor_t = copy.deepcopy(actor).requires_grad_(False) if ddpg else None
    maskers_a = [Masker(actor, sparsity, seed + MASK_SEED_OFFSET + 2)] if sparsity is not None else []
    maskers_c = [Masker(critic, sparsity, seed + MASK_SEED_OFFSET)] if sparsity is not None else []
    critic_t = copy.deepcopy(critic)
    for p in critic_t.parameters():
        p.requires_grad_(False)
    log_alpha = torch.tensor(math.log(c["temp_init"]), device=dev, requires_grad=True)
    opt_a = torch.optim.AdamW(actor.parameters(), lr=c["lr"], weight_decay=c["weight_decay"], fused=True)
    opt_c = torch.optim.AdamW(critic.parameters(), lr=c["lr"], weight_decay=c["weight_decay"], fused=True)
    opt_t = torch.optim.AdamW([log_alpha], lr=c["temp_lr"], weight_decay=0.0, fused=True)
    target_ent = c["target_entropy_coef"] * A
    norm = RunningNorm(sp.obs_dim)
    buf = Replay(c["total_steps"], sp.obs_dim, (A,), np.float32)
    gamma, batch = c["gamma"], c["batch_size"]
    low, high = sp.low, sp.high

    def pi(xo, deterministic=False, net=None):
        if ddpg:
            a = torch.tanh((net or actor)(xo))
            if not deterministic:
                a = (a + c["explore_std"] * torch.randn_like(a)).clamp(-1.0, 1.0)
            return a, None
        mu, ls = actor(xo).chunk(2, -1)
        ls = -10.0 + 0.5 * 12.0 * (torch.tanh(ls) + 1.0)  # log std in [-10, 2]
        if deterministic:
            return torch.tanh(mu), None
        std = ls.exp()
        u = mu + std * torch.randn_like(mu)
        a = torch.tanh(u)
        logp = (-0.5 * ((u - mu) / std) ** 2 - ls - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = logp - torch.log(1 - a.pow(2) + 1e-6).sum(-1)
        return a, logp

    def qv(net, xo, a):
        return net(torch.cat([xo, a], 1))

    def critic_target(r, no, d):
        with torch.no_grad():
            xn = _norm_cat(norm, no, dev=dev)
            an, lpn = pi(xn, deterministic=ddpg, net=actor_t)
            qn = qv(critic_t, xn, an).min(1).values
            soft = 0.0 if ddpg else log_alpha.exp() * lpn
            return torch.from_numpy(r).to(dev) + gamma * (1 - torch.from_numpy(d).to(dev)) * (qn - soft)

    def critic_loss(o, a, y):
        qs = qv(critic, _norm_cat(norm, o, dev=dev), torch.from_numpy(a).to(dev))
        return ((qs - y[:, None]) ** 2).sum(1).mean()

    def to_env(a):
        return low + 0.5 * (np.asarray(a, np.float32) + 1.0) * (high - low)

    def act(o, deterministic):
        with torch.no_grad():
            return pi(_norm_cat(norm, o[None], dev=dev), deterministic)[0][0].cpu().numpy()

    def evaluate(n_ep):
        rets = []
        for _ in range(n_ep):
            o, done, tot = ev.reset(), False, 0.0
            while not done:
                o, r, term, trunc = ev.step(to_env(act(o, True)))
                tot += r
                done = term or trunc
            rets.append(tot)
        return float(np.mean(rets))

    def diagnose(dseed, probe):
        """Diagnostics on a replay batch drawn from its own generators (the training RNGs are not touched):
        the critic's, with per-sample actor-loss gradients for grad_interference (the official
        compute_actor_gradient_cosine: loss_i = alpha log pi(a_i|s_i) - Q(s_i, a_i), a_i sampled; DDPG:
        -Q(s_i, pi(s_i)))."""
        o, ab, rb, no, d = buf.sample(np.random.default_rng(dseed), c["diag_batch"])
        with _rng_kept(dev):  # the SAC target samples next actions from torch's global generator
            y = critic_target(rb, no, d)
        xo = _norm_cat(norm, o, dev=dev)
        x = torch.cat([xo, torch.from_numpy(ab).to(dev)], 1)
        eps = torch.randn(len(o), A, generator=torch.Generator().manual_seed(dseed)).to(dev)
        alpha = log_alpha.exp().detach()

        def actor_loss_i(i):
            xi = xo[i:i + 1]
            if ddpg:
                return -qv(critic, xi, torch.tanh(actor(xi))).mean()
            mu, ls = actor(xi).chunk(2, -1)
            ls = -10.0 + 0.5 * 12.0 * (torch.tanh(ls) + 1.0)
            u = mu + ls.exp() * eps[i:i + 1]
            ai = torch.tanh(u)
            logp = (-0.5 * eps[i:i + 1] ** 2 - ls - 0.5 * math.log(2 * math.pi)).sum(-1)
            logp = logp - torch.log(1 - ai.pow(2) + 1e-6).sum(-1)
            return (alpha * logp - qv(critic, xi, ai).mean(1)).sum()

        with _rng_kept(dev):
            return _diagnose(critic, maskers_c[0] if maskers_c else None, x,
                             lambda i: critic_loss(o[i:i + 1], ab[i:i + 1], y[i:i + 1]), c["interference_samples"],
                             sparsity, seed, c, builder, actor=actor, actor_loss_i=actor_loss_i, probe=probe)

    curves, evals, losses, gnorms, credit, since = [], [], [], [], 0.0, 0
    obs = env.reset()
    norm.update(obs)
    for t in range(c["total_steps"]):
        a = rng.uniform(-1, 1, A).astype(np.float32) if t < c["learning_starts"] else act(obs, False)
        nobs, r, term, trunc = env.step(to_env(a))
        buf.add(obs, a, r, nobs, float(term))
        norm.update(nobs)
        obs = nobs
        if term or trunc:
            obs = env.reset()
            norm.update(obs)
        if t + 1 >= c["learning_starts"]:
            credit += c["replay_ratio"]
            while credit >= 1.0:
                credit -= 1.0
                o, ab, rb, no, d = buf.sample(rng, batch)
                y = critic_target(rb, no, d)
                lc = critic_loss(o, ab, y)
                opt_c.zero_grad()
                lc.backward()
                _step(opt_c, maskers_c)
                gnorms.append(D.grad_norm(critic))
                xo = _norm_cat(norm, o, dev=dev)
                ap, lp = pi(xo, deterministic=ddpg)
                ent = 0.0 if ddpg else log_alpha.exp().detach() * lp
                la = (ent - qv(critic, xo, ap).mean(1)).mean()
                opt_a.zero_grad()
                la.backward()
                _step(opt_a, maskers_a)
                if ddpg:
                    polyak(actor_t, actor, c["target_tau"])
                else:
                    lt = -(log_alpha * (lp.detach() + target_ent)).mean()
                    opt_t.zero_grad()
                    lt.backward()
                    opt_t.step()
                polyak(critic_t, critic, c["target_tau"])
                losses.append(lc.item())
        if (t + 1) % c["eval_every"] == 0:
            _log_eval(t + 1, evaluate(c["eval_episodes"]), evals, curves, losses, progress)
        if _diag_due(c, t):
            since = _log_diag(t + 1, diagnose(seed + 2 + t, probe=False), gnorms, since, curves)
    res = _finish(evals)
    # end-of-training diagnostics on a fixed replay batch (these feed the table and the claims)
    end = diagnose(seed + 1, probe=True)
    _log_diag(c["total_steps"], end, gnorms, since, curves)
    res.update(end)
    res["active_params"] = maskers_c[0].active_params() if maskers_c else count_params(critic)
    res["total_params"] = count_params(critic)
    res["cpu_seconds"] = time.process_time() - t0
    return {"metrics": res, "curves": curves, "losses": losses, "net": critic, "maskers": maskers_c + maskers_a,
            "opt": opt_c, "actor": actor}


def run_ddpg(c: dict, width: int, sparsity, seed: int, progress=None) -> dict:
    return run_sac(c, width, sparsity, seed, progress, kind="ddpg")


ALGOS = {"dqn": run_dqn, "sac": run_sac, "ddpg": run_ddpg}
