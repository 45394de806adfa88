"""Training on denoising: DEAL (fixed point + implicit gradient) and the same-patch DnCNN."""
from __future__ import annotations

import time

import numpy as np
import torch

from icml25.core.runtime import device_of  # noqa: F401 (the stages' training.device_of)

from .baselines import DnCNN
from .deal_model import DEAL


def model_device(model) -> torch.device:
    return next(model.parameters()).device if model is not None else torch.device("cpu")


def build_deal(cfg: dict, attention: bool) -> DEAL:
    m = cfg["model"]
    return DEAL(m["channels"], int(m["kernel"]), attention=attention, sn_size=int(m.get("sn_size", 256)))


def _batches(patches: np.ndarray, batch: int, steps: int, sigma_range, seed: int, device="cpu"):
    """(clean, noisy, sigma) batches: random patches, random flips, sigma ~ U[sigma_range] per patch; drawn
    on the host (the same batches on every device), then moved."""
    g = torch.Generator().manual_seed(seed)
    data = torch.as_tensor(patches)
    data = data[:, None] if data.ndim == 3 else data  # gray patches get their channel axis; colour have one
    lo, hi = float(sigma_range[0]), float(sigma_range[1])
    for _ in range(steps):
        idx = torch.randint(len(data), (batch,), generator=g)
        x = data[idx]
        if bool(torch.rand(1, generator=g) < 0.5):
            x = x.flip(-1)
        if bool(torch.rand(1, generator=g) < 0.5):
            x = x.flip(-2)
        sigma = lo + (hi - lo) * torch.rand(batch, generator=g)
        y = x + (sigma / 255).view(-1, 1, 1, 1) * torch.randn(x.shape, generator=g)
        yield x.to(device), y.to(device), sigma.to(device)


def train_deal(cfg: dict, patches: np.ndarray, seed: int, attention: bool = True, log_every: int = 10):
    """Adam on the MSE of the implicit-gradient step; the outer-iteration count of each step is drawn
    from U{n_out[0]..n_out[1]} (official: U{14..58})."""
    t = cfg["train"]
    torch.manual_seed(seed)
    dev = device_of(cfg)
    model = build_deal(cfg, attention).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=float(t["lr"]))
    g = torch.Generator().manual_seed(seed + 1)
    lo, hi = (int(v) for v in t["n_out"])
    curve, t0 = [], time.process_time()
    for step, (x, y, sigma) in enumerate(_batches(patches, int(t["batch"]), int(t["steps"]), t["sigma_range"], seed, dev)):
        n_out = int(torch.randint(lo, hi + 1, (1,), generator=g))
        out = model.denoise(y, sigma, n_out=n_out, n_in=int(t["n_in"]), eps_in=float(t["eps_in"]),
                            eps_out=float(t["eps_out"]), train=True, eps_bck=float(t["eps_bck"]))
        loss = torch.mean((out - x) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % log_every == 0 or step == int(t["steps"]) - 1:
            curve.append((step, float(loss.detach())))
    return model, curve, time.process_time() - t0


def train_dncnn(cfg: dict, patches: np.ndarray, seed: int, log_every: int = 10):
    d = cfg["dncnn"]
    torch.manual_seed(seed)
    dev = device_of(cfg)
    model = DnCNN(int(d["depth"]), int(d["features"]), int(cfg["model"]["channels"][0])).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=float(d["lr"]))
    curve, t0 = [], time.process_time()
    for step, (x, y, _) in enumerate(_batches(patches, int(d["batch"]), int(d["steps"]), cfg["train"]["sigma_range"], seed, dev)):
        loss = torch.mean((model(y) - x) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % log_every == 0 or step == int(d["steps"]) - 1:
            curve.append((step, float(loss.detach())))
    return model, curve, time.process_time() - t0
