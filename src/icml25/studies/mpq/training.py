"""FP pretraining, the bit-width search (DMPQ / SAM / ASGA / GMPQ-lite) and the deployment fine-tune.

The search stage ends in a serialised policy (JSON: layer -> [w_bits, a_bits]); the deploy stage
(`deploy`) takes only that policy, the FP model pretrained on the target and the target data.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from icml25.core.runtime import device_of, host_state  # noqa: F401 (the stages' and tests' T.device_of)

from .model import Net, layer_specs, load_fp_into
from .quant import policy_bitops
from .sharpness import adaptive_rho, sharpness, sharpness_aware_grads

SEARCH_KINDS = {"dmpq": "plain", "sam": "sam", "asga": "asga", "gmpq": "attribution", "oracle": "plain"}


def to_device(t: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """A host tensor on `dev`: pinned first for CUDA so the copy can overlap (a no-op on the CPU)."""
    if dev.type == "cuda":
        return t.pin_memory().to(dev, non_blocking=True)
    return t.to(dev)


def to_float(x: np.ndarray, dev: torch.device | None = None) -> torch.Tensor:
    """Images uint8 -> float in [0, 1], built on the host (the same values on every device), then moved."""
    if not x.flags.writeable:  # a slice of a read-only memmap: copy just these rows
        x = np.array(x)
    t = torch.as_tensor(x, dtype=torch.float32) / 255.0
    return t if dev is None else to_device(t, dev)


def to_labels(y: np.ndarray, dev: torch.device | None = None) -> torch.Tensor:
    t = torch.as_tensor(y)
    return t if dev is None else to_device(t, dev)


def model_device(net) -> torch.device:
    return next(net.parameters()).device


def sync(dev: torch.device) -> None:
    """Wait for queued GPU work, so that the timers around a loop measure the loop."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def batches(n: int, batch: int, rng: np.random.Generator):
    perm = rng.permutation(n)
    for i in range(0, n - batch + 1 if n >= batch else 1, batch):
        yield perm[i:i + batch]


def net_kwargs(cfg) -> dict:
    m = cfg["model"]
    return dict(width=list(m["width"]), blocks=list(m.get("blocks", [1] * len(m["width"]))),
                in_ch=int(m.get("in_ch", 1)), classes=int(m.get("classes", 10)), image=int(m["image"]),
                stem_kernel=int(m.get("stem_kernel", 3)), stem_stride=int(m.get("stem_stride", 2)),
                arch=str(m.get("arch", "resnet")), stem_pool=bool(m.get("stem_pool", False)), bits=tuple(m["bits"]))


def specs_of(cfg) -> list[dict]:
    """The layer specs of the configured network (no modules built)."""
    kw = net_kwargs(cfg)
    kw.pop("bits")
    return layer_specs(**kw)


@torch.no_grad()
def accuracy(net, x: np.ndarray, y: np.ndarray, batch: int = 1000) -> float:
    net.eval()
    dev = model_device(net)
    hit = 0
    for i in range(0, len(y), batch):
        hit += int((net(to_float(x[i:i + batch], dev)).argmax(1) == to_labels(y[i:i + batch], dev)).sum())
    return hit / len(y)


def loss_sharpness(net, x: np.ndarray, y: np.ndarray, rho: float) -> float:
    """SAM sharpness of the cross-entropy on (x, y), BN in eval mode, over the conv/BN/FC weights."""
    net.eval()
    dev = model_device(net)
    xt, yt = to_float(x, dev), to_labels(y, dev)
    weights = [p for n, p in net.named_parameters() if "alpha" not in n and "act_range" not in n]
    return sharpness(lambda: F.cross_entropy(net(xt), yt), weights, rho)


def cosine(lr: float, step: int, total: int) -> float:
    return 0.5 * lr * (1 + math.cos(math.pi * step / max(total, 1)))


def train_fp(cfg, x, y, epochs: int, seed: int) -> dict:
    """The full-precision model on one dataset (SGD, momentum 0.9, cosine lr)."""
    tc = cfg["fp"]
    dev = device_of(cfg)
    torch.manual_seed(seed)
    net = Net(mode="fp", **net_kwargs(cfg)).to(dev)  # initialised on the host (same draws), then moved
    opt = torch.optim.SGD(net.parameters(), float(tc["lr"]), momentum=0.9, weight_decay=float(tc["wd"]))
    rng = np.random.default_rng(seed)
    b = int(tc["batch"])
    total = int(epochs) * max(1, len(y) // b)
    step = 0
    for _ in range(int(epochs)):
        net.train()
        for idx in batches(len(y), b, rng):
            for g in opt.param_groups:
                g["lr"] = cosine(float(tc["lr"]), step, total)
            loss = F.cross_entropy(net(to_float(x[idx], dev)), to_labels(y[idx], dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
    return host_state(net)


# ---- attribution loss of GMPQ (GMPQ-lite) ---------------------------------------------------------

def attribution(net, x: torch.Tensor, create_graph: bool):
    """GMPQ's attribution of the last feature map: relu(sum_c (sum_hw d out_top / dF_c) F_c), the top class
    being each model's own prediction. Returns (logits, attribution (B, H*W))."""
    feats = net.features(x)
    out = net.head(feats)
    top = out.gather(1, out.detach().argmax(1, keepdim=True)).sum()
    (g,) = torch.autograd.grad(top, feats, create_graph=create_graph)
    a = F.relu((g.sum((2, 3), keepdim=True) * feats).sum(1))
    return out, a.flatten(1)


def attribution_loss(a_fp: torch.Tensor, a_q: torch.Tensor, pnorm: float) -> torch.Tensor:
    """GMPQ's cal_l2loss between the FP attribution to the power pnorm and the quantised one, both
    L2-normalised per image."""
    return (F.normalize(a_fp.pow(pnorm), dim=1) - F.normalize(a_q, dim=1)).pow(2).mean()


# ---- the budget ---------------------------------------------------------------------------------

def uniform_policy(specs, bits: int) -> dict:
    return {L["name"]: [int(bits), int(bits)] for L in specs if L["searchable"]}


def budget_bitops(cfg, specs) -> float:
    """The BitOPs budget every searched policy is matched to: uniform `budget_bits`-bit (w = a)."""
    return policy_bitops(specs, uniform_policy(specs, int(cfg["search"]["budget_bits"])))


def project_to_budget(policy: dict, logits: dict, specs, bits, budget: float, tol: float) -> tuple[dict, int]:
    """Move the argmax policy into [budget (1 - tol), budget (1 + tol)] by single bit steps chosen by the
    searched logits: each step is the one that costs the least log-probability per BitOP saved (or gained).
    Uses only the search's own output; returns the policy and the number of moves."""
    bits = list(bits)
    pol = {k: list(v) for k, v in policy.items()}
    macs = {L["name"]: L["macs"] for L in specs}
    moves = 0

    def logp(name, which, b):
        lg = logits[name][which]
        return float(torch.log_softmax(torch.as_tensor(lg, dtype=torch.float64), 0)[bits.index(b)])

    for _ in range(8 * len(pol) * len(bits)):
        cur = policy_bitops(specs, pol)
        if budget * (1 - tol) <= cur <= budget * (1 + tol):
            break
        down = cur > budget * (1 + tol)
        best = None
        for name, (wb, ab) in pol.items():
            for which, b in ((0, wb), (1, ab)):
                j = bits.index(b) + (-1 if down else 1)
                if not 0 <= j < len(bits):
                    continue
                nb = bits[j]
                other = ab if which == 0 else wb
                delta = abs(macs[name] * other * (nb - b))
                if not down and cur + delta > budget * (1 + tol):
                    continue
                cost = (logp(name, which, b) - logp(name, which, nb)) / delta
                if best is None or cost < best[0]:
                    best = (cost, name, which, nb)
        if best is None:
            break
        pol[best[1]][best[2]] = best[3]
        moves += 1
    return pol, moves


@torch.no_grad()
def recalibrate_bn(net, x, n_batches: int, batch: int, seed: int) -> None:
    """Re-estimate BatchNorm statistics for the network as it now computes (the one-hot policy): the running
    statistics of the search were collected under the softmax mixture of bit branches."""
    bns = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    net.train()
    dev = model_device(net)
    rng = np.random.default_rng(seed + 99)
    for i, idx in enumerate(batches(len(x), batch, rng)):
        if i >= n_batches:
            break
        net(to_float(x[idx], dev))
    for m, mom in zip(bns, saved):
        m.momentum = mom
    net.eval()


def onehot_(net, policy: dict) -> None:
    """Set the super-net's logits to the one-hot of `policy`: the super-net then computes that policy exactly."""
    with torch.no_grad():
        for name, m in net.mix_layers().items():
            wb, ab = policy[name]
            for par, b in ((m.alpha_w, wb), (m.alpha_a, ab)):
                par.fill_(-1e4)
                par[m.bits.index(int(b))] = 0.0


# ---- search -----------------------------------------------------------------------------------

def search(cfg, method: str, seed: int, x, y, fp_state: dict, fp_model_state: dict | None = None,
           eval_x=None, eval_y=None, log_every: int = 10) -> dict:
    """Differentiable MPQ search on (x, y). Returns the policy, its logits and the search's numbers."""
    kind = SEARCH_KINDS[method]
    sc = cfg["search"]
    dev = device_of(cfg)
    torch.manual_seed(seed)
    net = Net(mode="search", **net_kwargs(cfg))
    load_fp_into(net, fp_state)
    net.to(dev)
    budget = budget_bitops(cfg, net.specs)
    weights, arch = net.weight_parameters(), net.arch_parameters()
    opt_w = torch.optim.SGD(weights, float(sc["lr"]), momentum=0.9, weight_decay=float(sc["wd"]))
    opt_a = torch.optim.SGD(arch, float(sc["lr_alpha"]), momentum=0.9)
    fp_net = None
    if kind == "attribution":
        fp_net = Net(mode="fp", **net_kwargs(cfg))
        fp_net.load_state_dict(fp_model_state)
        fp_net.to(dev).eval()
    lam, rho = float(sc["lambda_c"]), float(sc.get("rho_max", sc.get("rho", 0.0)))
    rng = np.random.default_rng(seed)
    b = int(sc["batch"])
    curve, step, gaps = [], 0, []
    t0, w0 = time.process_time(), time.perf_counter()
    for _ in range(int(sc["epochs"])):
        net.train()
        for idx in batches(len(y), b, rng):
            xb, yb = to_float(x[idx], dev), to_labels(y[idx], dev)
            opt_w.zero_grad()
            opt_a.zero_grad()
            if kind in ("sam", "asga"):
                r = float(sc["rho"]) if kind == "sam" else rho
                out = sharpness_aware_grads(lambda: F.cross_entropy(net(xb), yb), weights, arch, r,
                                            float(sc["alpha"]) if kind == "asga" else 0.0, kind, net)
                ce = out["loss"]
                gaps.append(out["gap"])
                if kind == "asga":
                    rho = adaptive_rho(out["gap"], float(sc["rho_max"]))
            else:
                if kind == "attribution":
                    with torch.enable_grad():
                        _, a_fp = attribution(fp_net, xb, create_graph=False)
                    logits, a_q = attribution(net, xb, create_graph=True)
                    loss = F.cross_entropy(logits, yb)
                    ce = float(loss.detach())
                    loss = loss + float(sc["aux_weight"]) * attribution_loss(a_fp.detach(), a_q, float(sc["pnorm"]))
                else:
                    loss = F.cross_entropy(net(xb), yb)
                    ce = float(loss.detach())
                params = weights + arch
                gs = torch.autograd.grad(loss, params, allow_unused=True)
                for p, g in zip(params, gs):
                    p.grad = torch.zeros_like(p) if g is None else g
            # complexity loss on the bit logits only: lambda_c * max(0, E[BitOPs] / budget - 1), a hinge at the
            # budget (our stand-in for tuning lambda_c per arm until the policies land at the same BitOPs)
            comp = net.expected_bitops() / budget
            ratio = float(comp.detach())
            if ratio > 1.0:
                gc = torch.autograd.grad(comp, arch)
                for p, g in zip(arch, gc):
                    p.grad = p.grad + lam * g
            opt_w.step()
            opt_a.step()
            if step % log_every == 0:
                curve.append((step, ce, ratio, rho if kind == "asga" else float("nan")))
            step += 1
    sync(dev)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    logits = {name: [m.alpha_w.detach().tolist(), m.alpha_a.detach().tolist()] for name, m in net.mix_layers().items()}
    argmax = net.argmax_policy()
    policy, moves = project_to_budget(argmax, logits, net.specs, net_kwargs(cfg)["bits"], budget, float(sc["tol"]))
    res = {"policy": policy, "argmax_policy": argmax, "logits": logits, "steps": step, "cpu_s": cpu, "wall_s": wall,
           "lambda": lam, "rho": rho if kind == "asga" else float(sc.get("rho", 0.0)) if kind == "sam" else 0.0,
           "expected_ratio": float(net.expected_bitops().detach() / budget), "moves": moves, "curve": curve,
           "mean_gap": float(np.mean(gaps)) if gaps else float("nan"),
           "argmax_ratio": policy_bitops(net.specs, argmax) / budget}
    if eval_x is not None:
        onehot_(net, policy)
        recalibrate_bn(net, x, int(cfg["eval"].get("bn_batches", 8)), b, seed)
        res["proxy_top1"] = accuracy(net, eval_x, eval_y)
        n = int(cfg["eval"]["sharpness_n"])
        res["sharpness_proxy"] = loss_sharpness(net, x[:n], y[:n], float(cfg["eval"]["sharpness_rho"]))
    return res


# ---- deploy ---------------------------------------------------------------------------------------

def write_policy(path: Path, policy: dict, meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps({"policy": policy, **meta}, indent=1, sort_keys=True))
    tmp.replace(path)


def read_policy(path: Path) -> dict:
    return {k: [int(v[0]), int(v[1])] for k, v in json.loads(Path(path).read_text())["policy"].items()}


def deploy(cfg, policy_path: Path, fp_target_state: dict, train_xy, test_xy, seed: int) -> dict:
    """Fine-tune the fixed policy (read from its JSON file only) from the target FP model on the target's
    training split for the same number of steps in every arm; top-1 on the target test split."""
    dc = cfg["deploy"]
    policy = read_policy(policy_path)
    dev = device_of(cfg)
    torch.manual_seed(seed)
    net = Net(mode="fixed", policy=policy, **net_kwargs(cfg))
    load_fp_into(net, fp_target_state)
    net.to(dev)
    x, y = train_xy
    opt = torch.optim.SGD(net.parameters(), float(dc["lr"]), momentum=0.9, weight_decay=float(dc["wd"]))
    rng = np.random.default_rng(10_000 + seed)
    b, total = int(dc["batch"]), int(dc["steps"])
    step, t0 = 0, time.process_time()
    while step < total:
        net.train()
        for idx in batches(len(y), b, rng):
            if step >= total:
                break
            for g in opt.param_groups:
                g["lr"] = cosine(float(dc["lr"]), step, total)
            loss = F.cross_entropy(net(to_float(x[idx], dev)), to_labels(y[idx], dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
    sync(dev)
    cpu = time.process_time() - t0
    n = int(cfg["eval"]["sharpness_n"])
    return {"target_top1": accuracy(net, *test_xy), "bitops": policy_bitops(net.specs, policy),
            "sharpness_target": loss_sharpness(net, x[:n], y[:n], float(cfg["eval"]["sharpness_rho"])),
            "finetune_cpu_s": cpu, "finetune_steps": step,
            "budget": budget_bitops(cfg, net.specs)}
