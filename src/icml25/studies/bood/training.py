"""Training loops: stage 1 (encoder + cosine classifier against fixed anchors) and stage 3 (the classifier
from scratch, CE on ID plus each method's regulariser), with Dream-OOD's optimiser (SGD, momentum 0.9,
Nesterov, weight decay 5e-4, cosine-annealed learning rate per step).

Stage 3 regularisers:
  none      MSP / Energy (post hoc on the CE-only classifier)
  images    BOOD, Dream-OOD and the ablations: a batch of synthetic outlier images beside each ID batch;
            L = CE(ID) + beta * CE(Linear(1,2)(logsumexp f(x)), ID = 1 / OOD = 0)   (train_ood_det_cifar100.py)
  vos       pytorch-ood's VirtualOutlierSynthesizingRegLoss on the penultimate features (class-conditional
            Gaussians, lowest-likelihood samples), switched on after `start_frac` of the epochs
  npos      NPOS-style outliers drawn each step in the (normalised) penultimate space of the model being
            trained, through its last layer, with the same logistic energy regulariser
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import placement as P
from .models import Encoder, cosine_logits, make_net


def _sgd(params, cfg, total_steps):
    if cfg.get("optimizer", "sgd") == "adam":
        opt = torch.optim.Adam(params, lr=float(cfg["lr"]))
    else:
        opt = torch.optim.SGD(params, lr=float(cfg["lr"]), momentum=0.9, nesterov=True,
                              weight_decay=float(cfg.get("weight_decay", 5e-4)))
    lo = 1e-6 / float(cfg["lr"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lo + (1 - lo) * 0.5 * (1 + math.cos(min(s, total_steps) / max(total_steps, 1) * math.pi)))
    return opt, sched


class _LazyRows:
    """A lazy split (`store.ImageStore`) seen as a tensor: `rows[idx]` reads only those rows."""

    def __init__(self, split):
        self.split, self.shape = split, torch.Size(split.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx) -> torch.Tensor:
        if isinstance(idx, torch.Tensor):
            idx = idx.numpy()
        return torch.from_numpy(self.split[idx])


def rows_of(x):
    """An in-memory array as the tensor it always was (mini numbers unchanged), a lazy split as `_LazyRows`."""
    return torch.from_numpy(x) if isinstance(x, np.ndarray) else _LazyRows(x)


def _batches(n, bs, gen):
    perm = torch.randperm(n, generator=gen)
    return [perm[i:i + bs] for i in range(0, n - bs + 1, bs)] or [perm]


def train_encoder(cfg: dict, x: np.ndarray, y: np.ndarray, anchors: np.ndarray, seed: int):
    """Stage 1: encoder h with logits cos(h(x), anchor_c) / tau, cross-entropy; the anchors are fixed."""
    lat = cfg["latent"]
    dev = P.device_of(cfg)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)  # batch order drawn on the host: the same on every device
    X, Y = rows_of(x), torch.from_numpy(y)
    A = P.place(torch.from_numpy(anchors).float(), dev)
    enc = P.place(Encoder(lat, X.shape[1], X.shape[-1], A.shape[1]), dev)
    bs, epochs = int(lat["batch"]), int(lat["epochs"])
    nb = len(_batches(len(X), bs, gen))
    opt, sched = _sgd(enc.parameters(), lat, epochs * nb)
    curve = []
    for ep in range(epochs):
        for idx in _batches(len(X), bs, gen):
            xb, yb = P.place(X[idx], dev), P.place(Y[idx], dev)
            loss = F.cross_entropy(cosine_logits(enc(xb), A, float(lat["tau"])), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        curve.append((ep, float(loss.detach())))
    enc.eval()
    return enc, curve


@torch.no_grad()
def encode(enc, x: np.ndarray, device="cpu", bs: int = 1024) -> np.ndarray:
    """Features of x, a batch at a time on `device` (where enc is), returned on the host."""
    X = rows_of(x)
    return torch.cat([enc(P.place(X[i:i + bs], device)).cpu() for i in range(0, len(X), bs)]).numpy()


def energy_reg(logits_in, logits_out, head):
    """Dream-OOD's regulariser: logistic regression Linear(1,2) on logsumexp(logits), ID = 1, OOD = 0."""
    e = torch.cat([torch.logsumexp(logits_in, 1), torch.logsumexp(logits_out, 1)])
    lab = torch.cat([torch.ones(len(logits_in), device=e.device), torch.zeros(len(logits_out), device=e.device)]).long()
    return F.cross_entropy(head(e[:, None]), lab)


def _vos_loss_class():
    """pytorch-ood's VOS loss. The package's __init__ imports torchvision (absent beside the CPU torch
    2.13 of the mini profile), so without torchvision its loss module is loaded on its own."""
    import importlib.util
    import sys
    import types

    # the loss module on its own always (never the package __init__): whether torchvision "exists" can be
    # wrong in a process where a stub stood in for it (deal's deepinv test), and vos.py does not need it
    if "pytorch_ood.loss.vos" not in sys.modules:
        spec = importlib.util.find_spec("pytorch_ood")
        if spec is None:
            raise ImportError("pytorch-ood is not installed: pip install --no-deps pytorch-ood==0.4.0")
        from pathlib import Path

        root = Path(spec.origin).parent
        for name, path in (("pytorch_ood", root), ("pytorch_ood.loss", root / "loss")):
            if name not in sys.modules:
                mod = types.ModuleType(name)
                mod.__path__ = [str(path)]
                sys.modules[name] = mod
    import pytorch_ood.loss.vos as vos

    return vos.VirtualOutlierSynthesizingRegLoss


def train_classifier(cfg: dict, x: np.ndarray, y: np.ndarray, seed: int, reg: str = "none",
                     outliers: np.ndarray | None = None):
    """Stage 3: the classifier from scratch. Returns (model, curve rows, CPU seconds)."""
    from .synthesis import npos_outliers

    c = cfg["classifier"]
    dev = P.device_of(cfg)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)  # batches and outlier draws on the host: the same on every device
    X, Y = rows_of(x), torch.from_numpy(y)
    n_cls = int(Y.max()) + 1
    net = P.place(make_net(c, X.shape[1], X.shape[-1], n_cls), dev)
    head = P.place(torch.nn.Linear(1, 2), dev)
    params = list(net.parameters()) + list(head.parameters())
    vos = None
    if reg == "vos":
        V = cfg["vos"]
        we = torch.nn.Linear(n_cls, 1)
        torch.nn.init.uniform_(we.weight)
        we = P.place(we, dev)
        # its class queues are buffers: placed with the loss
        vos = P.place(_vos_loss_class()(logistic_regression=head, weights_energy=we, fc=net.fc,
                                        alpha=float(V["weight"]), sample_number=int(V["sample_number"]),
                                        select=int(V["select"]), sample_from=int(V["sample_from"])), dev)
        params = list(net.parameters()) + list(head.parameters()) + list(we.parameters())
    bs, epochs = int(c["batch"]), int(c["epochs"])
    nb = len(_batches(len(X), bs, gen))
    opt, sched = _sgd(params, c, epochs * nb)
    O = rows_of(outliers) if outliers is not None and len(outliers) else None
    beta = float(cfg["energy"]["beta"])
    frac = {"vos": cfg.get("vos", {}).get("start_frac", 0), "npos": cfg.get("npos", {}).get("start_frac", 0)}
    start = int(round(float(frac.get(reg, cfg["energy"]["start_frac"])) * epochs))
    curve, cpu0 = [], time.process_time()
    step = 0
    for ep in range(epochs):
        net.train()
        for idx in _batches(len(X), bs, gen):
            xb, yb = P.place(X[idx], dev), P.place(Y[idx], dev)
            on = ep >= start
            if reg == "images" and O is not None and on:
                ob = P.place(O[torch.randint(0, len(O), (int(c["ood_batch"]),), generator=gen)], dev)
                logits = net(torch.cat([xb, ob]))
                li, lo = logits[: len(xb)], logits[len(xb):]
                loss = F.cross_entropy(li, yb) + beta * energy_reg(li, lo, head)
            elif reg == "vos":
                feats = net.features(xb)
                logits = net.fc(feats)
                if on:
                    loss = vos(logits, feats, yb)
                else:
                    loss = F.cross_entropy(logits, yb)
                    vos._update_queues(feats.detach(), yb)  # fill the class queues before the regulariser starts
            elif reg == "npos" and on:
                feats = net.features(xb)
                li = net.fc(feats)
                virt = npos_outliers(feats, yb, cfg, gen) * feats.detach().norm(dim=1).mean()
                loss = F.cross_entropy(li, yb)
                if len(virt):
                    loss = loss + float(cfg["npos"]["weight"]) * energy_reg(li, net.fc(virt), head)
            else:
                loss = F.cross_entropy(net(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
        curve.append({"setting": "train", "metric": "train_loss", "step": ep, "value": float(loss.detach())})
    net.eval()
    return net, curve, time.process_time() - cpu0


@torch.no_grad()
def logits_of(net, x: np.ndarray, device="cpu", bs: int = 1024) -> torch.Tensor:
    """Logits of x, a batch at a time on `device` (where net is), returned on the host."""
    X = rows_of(np.ascontiguousarray(x, dtype=np.float32) if isinstance(x, np.ndarray) else x)
    if not len(X):
        return torch.zeros(0, 1)
    return torch.cat([net(P.place(X[i:i + bs], device)).cpu() for i in range(0, len(X), bs)])
