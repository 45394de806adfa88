"""Unlearning runs: the method table, the training loop, the retain-calibrated evaluation and the
learning-rate choice on the validation author split.

Learning rate (`unlearn.lr_select`): `shared` (the main arm, the official protocol: one lr for every method,
as the official code runs every objective at the config's lr 2e-5) is chosen once, in fit_base, by GA on the
validation authors (`choose_shared_lr`), and every method and variant uses it; `per_method` (a labelled
departure, the earlier protocol of this study) chooses it per method, seed and variant on the validation
authors. A grid of one value is used as is."""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import numpy as np

from . import losses as L
from . import lm

# method -> objective and its hyper-parameters (config `hp.<method>` overrides any of them)
SPECS = {
    "ga": {"objective": "weighted", "kind": "ga"},
    "gd": {"objective": "weighted", "kind": "ga", "retain": 1.0},
    # official forget_base.yaml: beta 2.5 (NPO and SimNPO), npo_coeff 0.1375 on the NPO term of NPO+GD,
    # grad_diff_coeff 1.0 on its retain NLL
    "npo": {"objective": "npo", "beta": 2.5},
    "npo_gd": {"objective": "npo", "beta": 2.5, "forget": 0.1375, "retain": 1.0},
    "simnpo": {"objective": "simnpo", "beta": 2.5, "gamma": 0.0},
    "simsat": {"objective": "weighted", "kind": "simsat", "beta": 1.0},
    "simimp": {"objective": "weighted", "kind": "simimp", "beta": 1.0},
    "satimp": {"objective": "weighted", "kind": "satimp", "beta1": 5.0, "beta2": 0.1},
    "satimp_gd": {"objective": "weighted", "kind": "satimp", "beta1": 5.0, "beta2": 0.1, "retain": 0.1},
    "impt": {"objective": "weighted", "kind": "impt"},
    "topk": {"objective": "weighted", "kind": "topk", "q": 0.3},
    "bottomk": {"objective": "weighted", "kind": "bottomk", "q": 0.3},
}
# granularity variants of SimSat (config `variants.simsat.<name>: {kind: ...}`): simsat_instance, simsat_group
# (with `group`), simsat_batch; see losses.token_weights.


def spec_for(cfg: dict, method: str, override: dict | None = None) -> dict:
    spec = {**SPECS[method], **cfg.get("hp", {}).get(method, {}), **(override or {})}
    spec.setdefault("retain", 0.0)
    spec.setdefault("forget", 1.0)
    return spec


def forget_loss(spec: dict, l, mask, imp, l_ref=None):
    """The forget term (before its coefficient `forget`)."""
    if spec["objective"] == "weighted":
        return L.reweighted_ga(l, mask, L.token_weights(spec["kind"], l, mask, imp, spec),
                               spec.get("reduction") or L.REDUCTION[spec["kind"]])
    if spec["objective"] == "npo":
        return L.npo(l, mask, l_ref, float(spec["beta"]))
    if spec["objective"] == "simnpo":
        return L.simnpo(l, mask, float(spec["beta"]), float(spec["gamma"]))
    raise KeyError(spec["objective"])


def unlearn(model, orig: dict, ref_model, forget_enc: dict, retain_enc: dict, spec: dict, lr: float, ucfg: dict,
            seed: int) -> list[tuple[int, float]]:
    """Reset the model to the original weights and unlearn the forget set: `epochs` passes of minibatches
    (seeded order), AdamW (no weight decay), one warm-up epoch then linear decay (the HF Trainer schedule of
    the official code), gradients clipped to norm `max_grad_norm` (the official max_grad_norm = 1) when set.
    Loss = `forget` x forget term + `retain` x NLL on a random retain minibatch (when retain > 0)."""
    import torch

    lm.interpolate(model, orig, orig, 0.0)
    dev = next(model.parameters()).device
    model.train()
    g = torch.Generator().manual_seed(int(seed))
    n, bs = forget_enc["input_ids"].shape[0], int(ucfg["batch_size"])
    per_epoch = (n + bs - 1) // bs
    total = per_epoch * int(ucfg["epochs"])
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=float(ucfg.get("weight_decay", 0.0)))
    warm = per_epoch if ucfg.get("warmup_epoch", True) else 0
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / max(1, total - warm)))
    ref_sums = None
    if spec["objective"] == "npo":
        with torch.no_grad():
            ref_sums = []
            for s in range(0, n, 256):
                b = {k: v[s:s + 256].to(dev) for k, v in forget_enc.items()}
                ref_sums.append(lm.token_losses(ref_model, b)[0])
            width = max(x.shape[1] for x in ref_sums)
            ref_l = torch.cat([torch.nn.functional.pad(x, (0, width - x.shape[1])) for x in ref_sums])
    curve, step = [], 0
    n_ret = retain_enc["input_ids"].shape[0] if retain_enc is not None else 0
    for _ in range(int(ucfg["epochs"])):
        perm = torch.randperm(n, generator=g)
        for s in range(0, n, bs):
            idx = perm[s:s + bs]
            b = {k: v.to(dev) for k, v in lm.batch_slice(forget_enc, idx).items()}
            l, m, imp = lm.token_losses(model, b)
            l_ref = ref_l[idx.to(dev)][:, : l.shape[1]] if ref_sums is not None else None
            loss = float(spec.get("forget", 1.0)) * forget_loss(spec, l, m, imp, l_ref)
            if float(spec.get("retain", 0.0)) > 0:
                ridx = torch.randint(0, n_ret, (len(idx),), generator=g)
                rb = {k: v.to(dev) for k, v in lm.batch_slice(retain_enc, ridx).items()}
                rl, rm, _ = lm.token_losses(model, rb)
                loss = loss + float(spec["retain"]) * L.nll(rl, rm)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if ucfg.get("max_grad_norm"):
                torch.nn.utils.clip_grad_norm_(model.parameters(), float(ucfg["max_grad_norm"]))
            opt.step()
            sched.step()
            curve.append((step, float((l.detach().sum() / m.sum()))))
            step += 1
    model.eval()
    return curve


def state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def calibrate(model, orig: dict, unl: dict, retain_enc: dict, target: float, coarse: float, refine: float):
    """The largest alpha (the least share 1 - alpha of the original) on a grid whose retain ES is at least
    `target`: a coarse pass downward from alpha = 1, then a fine pass in the coarse step above it. alpha = 0
    (the original model) always qualifies. Returns (alpha, retain ES at alpha, evaluations)."""
    def ok(a):
        lm.interpolate(model, orig, unl, a)
        es = float(lm.es_scores(model, retain_enc).mean())
        return es >= target - 1e-12, es

    evals = 0
    grid = [round(1.0 - i * coarse, 10) for i in range(int(round(1 / coarse)) + 1)]
    found, es_found = 0.0, None
    for a in grid:
        good, es = ok(a)
        evals += 1
        if good:
            found, es_found = a, es
            break
    if found < 1.0 and refine and refine < coarse:
        for i in range(int(round(coarse / refine)) - 1, 0, -1):
            a = round(found + i * refine, 10)
            good, es = ok(a)
            evals += 1
            if good:
                found, es_found = a, es
                break
    lm.interpolate(model, orig, unl, found)
    return found, es_found, evals


# ---- one (method, seed) job --------------------------------------------------------------------------------

def _encodings(tok, splits: dict, prompt: dict, names) -> dict:
    enc = {}
    for name in names:
        items = splits[name]
        enc[name] = lm.encode(tok, items, prompt)
        if name in ("forget10", "forget05", "forget01", "val_forget"):
            enc[name + ":para"] = lm.encode(tok, items, prompt, question_key="para_question")
    return enc


def run(cfg: dict, method: str, seed: int, data_dir: Path, base_dir: Path, run_dir: Path) -> dict:
    """Choose lr on the validation authors, unlearn each forget split (and the beta sweep), evaluate ES raw and
    at the calibrated mix; write results.json into run_dir. Returns the train stage's curves and metrics."""
    t0, c0 = time.time(), time.process_time()
    splits = json.loads((Path(data_dir) / "splits.json").read_text())
    model, tok, rec = lm.load_base(base_dir)
    prompt = cfg["prompt"]
    ucfg = cfg["unlearn"]
    forget_splits = list(cfg["data"]["forget_splits"])
    enc = _encodings(tok, splits, prompt, forget_splits + ["val_forget", "retain_train", "retain_val",
                                                           "retain_eval", "world"])
    orig = state(model)
    ref = copy.deepcopy(model).eval() if method in ("npo", "npo_gd") else None
    if ref is not None:
        for p in ref.parameters():
            p.requires_grad_(False)
    es0 = rec["es_original"]
    frac = float(cfg["eval"]["retain_fraction"])
    coarse, fine = float(cfg["eval"]["alpha_step"]), float(cfg["eval"]["alpha_refine"])

    # the method itself, then its variants (granularity, beta sweep) as extra settings "<split>|<variant>"
    variants = [("", {})] + [(f"|{name}", dict(ov)) for name, ov in cfg.get("variants", {}).get(method, {}).items()]
    if cfg.get("variant_seeds") is not None and int(seed) not in {int(x) for x in cfg["variant_seeds"]}:
        variants = variants[:1]  # the variants (granularity, beta sweep) run on `variant_seeds` only (cost)

    lr_mode = str(ucfg.get("lr_select", "per_method"))
    if lr_mode not in ("shared", "per_method"):
        raise ValueError(f"satimp: unlearn.lr_select must be 'shared' or 'per_method', got {lr_mode!r}")
    shared = None
    if lr_mode == "shared":
        if "unlearn_lr" not in rec:  # fit_base chooses it once (a shared-lr config reruns fit_base)
            raise KeyError(f"satimp: {Path(base_dir) / 'base.json'} has no unlearn_lr; rerun fit_base")
        shared = rec["unlearn_lr"]
    results, curves = {}, []
    for suffix, override in variants:
        spec = spec_for(cfg, method, override)
        # 1. lr: the shared one fit_base chose by GA on the validation authors (official protocol: one lr for
        # every method), or per method on the validation authors; never on the test forget set
        if shared is not None:
            lr, grid, val = float(shared["lr"]), list(shared["grid"]), list(shared["val_cal_es"])
        else:
            lr, grid, val = val_lr(model, orig, ref, enc, spec, cfg, seed, es0)
        for split in forget_splits:
            setting = split + suffix
            curve = unlearn(model, orig, ref, enc[split], enc["retain_train"], spec, lr, ucfg, seed)
            curves += [{"setting": setting, "metric": "forget_nll", "step": s, "value": v} for s, v in curve]
            unl = state(model)
            out = {"lr": lr, "val_lr_grid": grid, "val_cal_es": val, "lr_select": lr_mode}
            for name, key in ((split, "es_forget"), (split + ":para", "es_forget_para"), ("retain_eval", "es_retain"),
                              ("world", "es_world")):
                out[key] = float(lm.es_scores(model, enc[name]).mean())
            if suffix == "":
                out["ret_err_fact"], out["ret_err_template"] = lm.token_errors(model, enc["retain_eval"])
            a, es_r, n_eval = calibrate(model, orig, unl, enc["retain_eval"], frac * es0["retain_eval"], coarse, fine)
            out.update(cal_alpha=a, cal_evals=n_eval, cal_es_retain=es_r)
            for name, key in ((split, "cal_es_forget"), (split + ":para", "cal_es_forget_para"), ("world", "cal_es_world")):
                out[key] = float(lm.es_scores(model, enc[name]).mean())
            if suffix == "":
                out["cal_ret_err_fact"], out["cal_ret_err_template"] = lm.token_errors(model, enc["retain_eval"])
            if suffix == "":
                out.update(weight_analysis(model, orig, enc[split], spec))
                out.update({f"orig_{k}": v for k, v in es0.items() if k in (split, split + ":para", "retain_eval", "world")})
            results[setting] = out
    lm.interpolate(model, orig, orig, 0.0)
    res = {"method": method, "seed": seed, "results": results, "p_fact_orig": rec.get("p_fact"),
           "p_template_orig": rec.get("p_template"), "wall_seconds": time.time() - t0,
           "cpu_seconds": time.process_time() - c0}
    (Path(run_dir) / "results.json").write_text(json.dumps(res, indent=1))
    return {"curves": curves}


def val_lr(model, orig: dict, ref, enc: dict, spec: dict, cfg: dict, seed: int, es0: dict):
    """(lr, grid, calibrated val-forget ES per lr): the grid lr whose unlearning of the validation authors
    (val_forget, calibrated on retain_val) leaves the lowest forget ES; a one-value grid is used as is."""
    ucfg, ev = cfg["unlearn"], cfg["eval"]
    grid = [float(x) for x in ucfg["lr_grid"]]
    if len(grid) == 1:
        return grid[0], grid, []
    val = []
    for lr in grid:
        unlearn(model, orig, ref, enc["val_forget"], enc["retain_train"], spec, lr, ucfg, seed)
        unl = state(model)
        calibrate(model, orig, unl, enc["retain_val"], float(ev["retain_fraction"]) * es0["retain_val"],
                  float(ev["alpha_step"]), float(ev["alpha_refine"]))
        val.append(float(lm.es_scores(model, enc["val_forget"]).mean()))
    lm.interpolate(model, orig, orig, 0.0)
    return grid[int(np.argmin(val))], grid, val


def choose_shared_lr(model, orig: dict, enc: dict, cfg: dict, es0: dict) -> dict:
    """The one lr every method uses (lr_select: shared): chosen by GA, the objective every reweighting
    modifies, on the validation authors at the base seed. Called by fit_base (recorded in base.json)."""
    lr, grid, val = val_lr(model, orig, None, enc, spec_for(cfg, "ga"), cfg, int(cfg.get("base_seed", 0)), es0)
    return {"lr": lr, "grid": grid, "val_cal_es": val, "method": "ga"}


def shared_lr_for_base(model, tok, splits: dict, cfg: dict, es0: dict) -> dict:
    """choose_shared_lr on freshly encoded validation splits (fit_base's entry point)."""
    enc = _encodings(tok, splits, cfg["prompt"], ["val_forget", "retain_train", "retain_val"])
    return choose_shared_lr(model, state(model), enc, cfg, es0)


def weight_analysis(model, orig: dict, enc: dict, spec: dict) -> dict:
    """On the original model's forget tokens: Spearman(weight, p) of the method's weighting, and the mean
    weight on annotated fact tokens over the mean weight on template tokens."""
    import torch
    from scipy.stats import spearmanr

    if spec["objective"] != "weighted" or spec["kind"] == "ga":
        return {}
    lm.interpolate(model, orig, orig, 0.0)
    ws, ps, imps = [], [], []
    with torch.no_grad():
        l, m, imp = lm.token_losses(model, {k: v for k, v in enc.items()})
        w = L.token_weights(spec["kind"], l, m, imp, spec)
        sel = m.bool()
        ws, ps, imps = w[sel].numpy(), torch.exp(-l[sel]).numpy(), imp[sel].numpy()
    out = {}
    if np.ptp(ws) > 0 and np.ptp(ps) > 0:
        out["spearman_w_p"] = float(spearmanr(ws, ps).statistic)
    fact, tmpl = ws[imps > 0], ws[imps == 0]
    if len(fact) and len(tmpl) and tmpl.mean() > 0:
        out["w_fact_over_template"] = float(fact.mean() / tmpl.mean())
    return out
