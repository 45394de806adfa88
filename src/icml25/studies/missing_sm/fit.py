"""Training loops: the GGM regularisation path (proximal SGD, App. E.3.2) and Gaussian parameter
estimation (Adam on a Cholesky-parametrised precision, App. E.3.1). Each runs G problems side by side.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from . import sm
from . import trunc as TR
from .adam import Adam
from .metrics import roc_auc  # noqa: F401  (numpy only; re-exported: F.roc_auc)

METHODS = ("marg_iw", "marg_var", "marg_var_diag", "em", "zeroed", "full")
# the variational methods: marg_var (Alg. 2, the paper's scalar-sigma family) and marg_var_diag (ours, an
# ablation: the same algorithm with one sigma per coordinate)
VAR_METHODS = ("marg_var", "marg_var_diag")


class Objective:
    """The per-step objective of one method; for marg_var it also owns and trains p'_phi."""

    def __init__(self, method: str, G: int, d: int, hp: dict, gen: torch.Generator):
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}")
        self.method, self.hp, self.gen = method, hp, gen
        self.r = int(hp["r"])
        self.prop_std = math.sqrt(float(hp["proposal_var"]))
        self.phi_steps = 0
        if method in VAR_METHODS:
            self.net = sm.VarNet(G, d, int(hp["var_hidden"]), gen=gen, diag=method == "marg_var_diag")
            self.opt = Adam(self.net.parameters(), lr=float(hp["var_lr"]))  # torch.optim.Adam's arithmetic (adam.py)

    def train_phi(self, model, X, M, batch: int, dom=None):
        """L steps of the variational objective at the current theta (Alg. 2, inner loop)."""
        for _ in range(int(self.hp["var_steps"])):
            idx = torch.randint(0, X.shape[1], (batch,), generator=self.gen)
            if dom is not None:
                J = TR.var_phi_objective_t(self.net, model, X[:, idx], M[:, idx], dom, self.hp["var_objective"], 1,
                                           self.gen)
            else:
                J = sm.var_phi_objective(self.net, model, X[:, idx], M[:, idx], self.hp["var_objective"], 1,
                                         self.gen)
            self.opt.zero_grad()
            J.sum().backward()
            self.opt.step()
            self.phi_steps += 1

    def loss(self, model, X, M, Xfull, idx, dom=None):
        """(G,) tensor whose gradient is the method's theta-gradient estimate on rows idx; with a truncation
        domain (trunc.Domain) the truncated objective (eq. (5), Cor. 4.11, eq. (25))."""
        x, m = X[:, idx], M[:, idx]
        if dom is not None:
            return self._loss_t(model, x, m, Xfull[:, idx], dom)
        if self.method == "full":
            return sm.hyvarinen(model, Xfull[:, idx])
        if self.method == "zeroed":
            return sm.zeroed(model, x, m)
        if self.method == "marg_iw":
            return sm.marg_iw(model, x, m, self.r, self.prop_std, self.gen)
        if self.method == "em":
            return sm.em(model, x, m, self.r, self.prop_std, self.gen)
        with torch.no_grad():
            xk, _, _ = self.net.sample(x, m, self.r, self.gen)
        return sm.var_pseudo_loss(model, xk, m)[0]

    def _loss_t(self, model, x, m, xfull, dom):
        cap = float(self.hp.get("g_cap", 1.0))
        if self.method == "full":
            return TR.hyvarinen_t(model, xfull, dom, cap)
        if self.method == "zeroed":
            return TR.zeroed_t(model, x, m, dom, cap)
        if self.method == "marg_iw":
            return TR.marg_iw_t(model, x, m, dom, self.r, self.prop_std, self.gen, cap=cap)
        if self.method == "em":
            return TR.em_t(model, x, m, dom, self.r, self.prop_std, self.gen, cap=cap)
        with torch.no_grad():
            xk = TR.var_sample_t(self.net, x, m, dom, self.r, self.gen)
        return TR.var_pseudo_loss_t(model, xk, m, dom, cap)[0]


def _prepare(X, M):
    X = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    M = torch.as_tensor(np.asarray(M), dtype=torch.bool)
    Xobs = torch.where(M, X, torch.zeros_like(X))  # all that the missing-data methods ever see
    return X, M, Xobs


def gamma_schedule(path_hp: dict) -> tuple[np.ndarray, list[float], set[int]]:
    """App. E.3.2: iters_first iterations at gamma_max, then iters_per_gamma at each of n_gammas
    log-spaced gammas strictly below it down to gamma_min; a snapshot at the end of every block."""
    gs = np.logspace(float(path_hp["log10_gamma_max"]), float(path_hp["log10_gamma_min"]),
                     int(path_hp["n_gammas"]) + 1)
    schedule = [float(gs[0])] * int(path_hp["iters_first"])
    snaps = {len(schedule) - 1}
    for g in gs[1:]:
        schedule += [float(g)] * int(path_hp["iters_per_gamma"])
        snaps.add(len(schedule) - 1)
    return gs, schedule, snaps


def fit(method: str, groups: dict, hp: dict, seed: int, progress=None) -> dict:
    """Run one method on several groups of problems in one loop (one theta-step of every problem per
    iteration; problems never interact). groups: name -> {"X": (G,n,d), "M": (G,n,d), "kind": ...}.

    kind "path": GGM estimation, P direct (symmetric) from P = I, mu from 0, proximal SGD (lr) on
      L(theta) + gamma sum_{j<j'} |P_jj'| along the gamma schedule; returns the P snapshots.
    kind "adam": parameter estimation, P = L L^T (Cholesky), Adam(lr_adam) from P = I, mu = 0;
      returns (mu, P) at the checkpoint iterations.
    All problems must share n and d (they are stacked); the methods see X only where M is True,
    except `full` (the oracle), which sees the complete rows. A group may carry a truncation domain per
    problem ("lo" (G,d), "a" (G,d), "b" (G,), see trunc.Domain); if any does, every problem of the call is fitted
    with the truncated objective (untruncated ones then have g = g_cap, i.e. their usual loss for g_cap = 1).
    """
    gen = torch.Generator().manual_seed(int(seed))
    names = list(groups)
    Xs, Ms, Xo = zip(*(_prepare(groups[k]["X"], groups[k]["M"]) for k in names))
    X, M, Xobs = torch.cat(Xs), torch.cat(Ms), torch.cat(Xo)
    G, n, d = X.shape
    sizes = [x.shape[0] for x in Xs]
    obj = Objective(method, G, d, hp, gen)
    dom = None
    if any(any(k in groups[nm] for k in ("lo", "a", "b")) for nm in names):
        parts = []
        for nm, g in zip(names, sizes):
            spec, none = groups[nm], TR.Domain.none(g, d)
            parts.append((torch.as_tensor(np.asarray(spec["lo"]), dtype=torch.float32) if "lo" in spec else none.lo,
                          torch.as_tensor(np.asarray(spec["a"]), dtype=torch.float32) if "a" in spec else none.a,
                          torch.as_tensor(np.asarray(spec["b"]), dtype=torch.float32) if "b" in spec else none.b))
        dom = TR.Domain(*(torch.cat(t) for t in zip(*parts)))
        if bool((dom.is_box & dom.is_half).any()):
            raise ValueError("a problem has both a box and a halfspace truncation")
    batch = int(hp["batch"])
    off = ~torch.eye(d, dtype=torch.bool)
    state, T = {}, 0
    for k, g in zip(names, sizes):
        spec = groups[k]
        if spec["kind"] == "path":
            gs, schedule, snaps = gamma_schedule(hp["path"])
            st = {"mu": torch.zeros(g, d, requires_grad=True),
                  "A": torch.eye(d).repeat(g, 1, 1).requires_grad_(True),
                  "gammas": gs, "schedule": schedule, "snaps": snaps, "out": []}
            T = max(T, len(schedule))
        elif spec["kind"] == "adam":
            st = {"mu": torch.zeros(g, d, requires_grad=True),
                  "L": torch.zeros(g, d, d, requires_grad=True),
                  "logd": torch.zeros(g, d, requires_grad=True),
                  "checkpoints": sorted(int(c) for c in spec["checkpoints"]), "out": {}}
            st["opt"] = Adam([st["mu"], st["L"], st["logd"]], lr=float(hp["adam_lr"]))
            if 0 in st["checkpoints"]:
                st["out"][0] = (np.zeros((g, d), np.float32), np.tile(np.eye(d, dtype=np.float32), (g, 1, 1)))
            T = max(T, st["checkpoints"][-1])
        else:
            raise ValueError(f"unknown group kind {spec['kind']!r}")
        state[k] = st

    def current():
        mus, Ps = [], []
        for k in names:
            st = state[k]
            mus.append(st["mu"])
            Ps.append(sm.sym(st["A"]) if "A" in st else sm.cholesky_precision(st["L"], st["logd"]))
        return sm.Gaussian(torch.cat(mus), torch.cat(Ps))

    for t in range(T):
        model = current()
        if obj.method in VAR_METHODS:
            obj.train_phi(model, Xobs, M, batch, dom)
        idx = torch.randint(0, n, (batch,), generator=gen)
        loss = obj.loss(model, Xobs, M, X, idx, dom).sum()
        leaves = [p for k in names for p in ([state[k]["mu"], state[k]["A"]] if "A" in state[k]
                                            else [state[k]["mu"], state[k]["L"], state[k]["logd"]])]
        grads = dict(zip(map(id, leaves), torch.autograd.grad(loss, leaves, allow_unused=True)))
        for k in names:
            st = state[k]
            if "A" in st:
                if t >= len(st["schedule"]):
                    continue
                gamma, lr = st["schedule"][t], float(hp["lr"])
                with torch.no_grad():
                    st["mu"] -= lr * grads[id(st["mu"])]
                    A = st["A"]
                    A -= lr * sm.sym(grads[id(A)])
                    # proximal step for the L1 penalty on the off-diagonal: soft-threshold by lr*gamma
                    soft = torch.sign(A) * torch.clamp(A.abs() - lr * gamma, min=0.0)
                    A.copy_(torch.where(off, soft, A))
                    torch.diagonal(A, dim1=-2, dim2=-1).clamp_(min=float(hp["path"].get("min_diag", 1e-3)))
                if t in st["snaps"]:
                    st["out"].append(A.detach().clone())
            else:
                if t >= st["checkpoints"][-1]:
                    continue
                for p in (st["mu"], st["L"], st["logd"]):
                    p.grad = grads[id(p)]
                st["opt"].step()
                if t + 1 in st["checkpoints"]:
                    with torch.no_grad():
                        st["out"][t + 1] = (st["mu"].detach().clone().numpy(),
                                            sm.cholesky_precision(st["L"], st["logd"]).numpy())
        if progress is not None:
            progress.update(1)
    res = {"phi_steps": obj.phi_steps, "iterations": T}
    for k in names:
        st = state[k]
        if "A" in st:
            res[k] = {"path": torch.stack(st["out"], 1).numpy(), "gammas": st["gammas"],
                      "mu": st["mu"].detach().numpy()}
        else:
            res[k] = {"estimates": st["out"]}
    return res
