"""The weight computations of every method, run once in fit_base with the shared proxy:

- Chameleon: proxy LM on the uniform mixture -> domain embeddings -> KRLS -> softmax weights (pretraining and
  finetuning), a lambda sweep, and the transfer scenario (new domains embedded with the same proxy vs a proxy
  retrained on old + new domains).
- DoReMi: a Group-DRO proxy against the uniform proxy as reference model.
- DoGE and RegMix-lite (baselines.py): a DoGE proxy (gradient-alignment weights, time-averaged) and tiny
  proxies on Dirichlet mixtures + a linear regression (only when doge_tokens / regmix are configured).
- size-proportional: natural domain sizes (characters before any cap).
Each method's weight-computation FLOPs are logged.
"""
from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from . import baselines, data_prep, krls, lm


def domain_rng(seed: int, domain: str) -> np.random.Generator:
    """Per-domain stream: a domain's embedding does not depend on which other domains exist or their order."""
    return np.random.default_rng([int(seed), zlib.crc32(domain.encode())])


def embed_all(model, toks: dict, domains: list[str], ecfg: dict, seed: int) -> tuple[np.ndarray, float]:
    X, fwd_tokens = [], 0
    for d in domains:
        x, n = lm.embed_domain(model, toks[d]["train"], int(ecfg["windows"]), int(ecfg["ctx"]), domain_rng(seed, d))
        X.append(x)
        fwd_tokens += n
    return np.stack(X), 2.0 * lm.n_params(model) * fwd_tokens


def final_loss(curves: list[dict], last: int = 5) -> float:
    """Mean of the last `last` logged training losses (each logged loss is one batch's)."""
    vals = [float(c["value"]) for c in curves[-last:]]
    return float(np.mean(vals)) if vals else float("nan")


def chameleon_weights(X: np.ndarray, ccfg: dict) -> dict:
    return krls.chameleon(X, float(ccfg["lambda"]), bool(ccfg["normalise_omega"]), float(ccfg["pt_temperature"]),
                          float(ccfg["ft_temperature"]))


def _proxy_task(cfg: dict, data_dir: Path, out_dir: Path) -> dict:
    """The uniform proxy (saved, reloaded like a Hub checkpoint), every embedding made with it, and DoReMi's
    Group-DRO proxy, which needs it as the reference model."""
    meta, toks = data_prep.load(data_dir)
    P, N, ft = meta["pretrain_domains"], meta["new_domains"], list(cfg["finetune"]["domains"])
    seed, mcfg, hp, ecfg = int(cfg.get("base_seed", 0)), cfg["model"], cfg["train"], cfg["embed"]
    proxy = lm.build(mcfg, int(meta["vocab_size"]), seed)
    res = lm.train(proxy, [toks[d]["train"] for d in P], np.ones(len(P)), int(cfg["proxy_tokens"]), hp, seed)
    lm.save(proxy, out_dir / "proxy", data_dir / "tokenizer.json")
    proxy = lm.load(out_dir / "proxy")  # the Hub-like path: everything downstream uses the saved checkpoint
    out = {"proxy": res, "n_params": lm.n_params(proxy)}
    for key, domains in (("pretrain", P), ("finetune", ft), ("new", N)):
        out[key] = embed_all(proxy, toks, domains, ecfg, seed)
    proxy3 = lm.build(mcfg, int(meta["vocab_size"]), seed + 1)
    out["doremi"] = lm.train(proxy3, [toks[d]["train"] for d in P], np.ones(len(P)), int(cfg["doremi_tokens"]),
                             {**hp, **cfg["doremi"]}, seed + 1, doremi_ref=proxy)
    return out


def _retrained_task(cfg: dict, data_dir: Path) -> dict:
    """Transfer baseline: a proxy retrained on old + new domains, and its embeddings of all of them."""
    meta, toks = data_prep.load(data_dir)
    PN = meta["pretrain_domains"] + meta["new_domains"]
    seed = int(cfg.get("base_seed", 0))
    proxy2 = lm.build(cfg["model"], int(meta["vocab_size"]), seed)
    res = lm.train(proxy2, [toks[d]["train"] for d in PN], np.ones(len(PN)), int(cfg["proxy_tokens"]), cfg["train"], seed)
    return {"train": res, "embed": embed_all(proxy2, toks, PN, cfg["embed"], seed)}


def _doge_task(cfg: dict, data_dir: Path) -> dict:
    meta, toks = data_prep.load(data_dir)
    seed = int(cfg.get("base_seed", 0)) + 2
    proxy4 = lm.build(cfg["model"], int(meta["vocab_size"]), seed)
    return baselines.train_doge(proxy4, [toks[d]["train"] for d in meta["pretrain_domains"]], int(cfg["doge_tokens"]),
                                cfg["train"], cfg.get("doge", {}), seed)


def _regmix_task(cfg: dict, data_dir: Path, w, run_seed: int) -> dict:
    meta, toks = data_prep.load(data_dir)
    return baselines.regmix_run(cfg["model"], int(meta["vocab_size"]), [toks[d]["train"] for d in meta["pretrain_domains"]],
                                w, cfg["train"], cfg["regmix"], run_seed)


def fit_base(cfg: dict, data_dir: Path, out_dir: Path, workers: int | None = None) -> dict:
    """Every method's weights. The proxies are independent and each seeds itself, so they run as parallel
    tasks on the stage's cores (`workers`, default: its --threads); the result does not depend on it."""
    from icml25.core import runtime

    meta = data_prep.load(data_dir)[0]
    P, N = meta["pretrain_domains"], meta["new_domains"]
    ft = list(cfg["finetune"]["domains"])
    seed = int(cfg.get("base_seed", 0))
    ccfg = cfg["chameleon"]
    nat = np.array([meta["domains"][d]["natural_chars"] for d in P], dtype=np.float64)  # size-proportional

    tasks = [("proxy", _proxy_task, (cfg, data_dir, out_dir))]  # the longest first
    if "doge_tokens" in cfg:
        tasks.append(("doge", _doge_task, (cfg, data_dir)))
    tasks.append(("retrained", _retrained_task, (cfg, data_dir)))
    if "regmix" in cfg:  # RegMix's Dirichlet prior is the natural size distribution
        W, rm_rng = baselines.regmix_design(nat, cfg["regmix"], seed + 3)
        tasks += [(f"regmix{r}", _regmix_task, (cfg, data_dir, w, seed + 3 + 100 + r)) for r, w in enumerate(W)]
    done = runtime.run_tasks([(fn, args) for _, fn, args in tasks], runtime.threads() if workers is None else workers)
    out = dict(zip([name for name, _, _ in tasks], done))
    px, re_, doge = out["proxy"], out["retrained"], out.get("doge")

    res = px["proxy"]
    curves = [{"setting": "proxy", "metric": "proxy_loss", **c} for c in res["curves"]]
    rec = {"pretrain_domains": P, "new_domains": N, "ft_domains": ft,
           "n_params": px["n_params"], "proxy_train_flops": res["flops"]}

    # 2.-5. Chameleon pretraining weights (+ lambda sweep)
    X, emb_flops = px["pretrain"]
    ch = chameleon_weights(X, ccfg)
    # issue 31: the spectrum of the Omega the scores come from (trace-normalised when normalise_omega), the
    # ridge lambda k it is compared with, and how well the proxy is trained (mean of its last logged losses)
    rec["chameleon"] = {"S": ch["S"].tolist(), "weights": ch["pretrain"].tolist(), "omega": ch["omega"].tolist(),
                        "omega_eig": ch["eig"].tolist(), "ridge": float(ccfg["lambda"]) * len(P),
                        "embed_flops": emb_flops}
    rec["proxy_loss"] = final_loss(res["curves"])
    rec["flops"] = {"uniform": 0.0, "proportional": 0.0, "chameleon": res["flops"] + emb_flops}
    rec["sweep"] = {}
    for lam in ccfg["lambda_sweep"]:
        r = krls.chameleon(X, float(lam), bool(ccfg["normalise_omega"]), float(ccfg["pt_temperature"]))
        rec["sweep"][str(lam)] = {"S": r["S"].tolist(), "weights": r["pretrain"].tolist(),
                                  "ridge": float(lam) * len(P),
                                  "rho_vs_default": krls.spearman(r["pretrain"], ch["pretrain"])}

    # finetuning weights: KRLS among the finetuning domains, embedded with the same proxy
    Xft, ft_flops = px["finetune"]
    chf = chameleon_weights(Xft, ccfg)
    rec["finetune"] = {"S": chf["S"].tolist(), "weights": chf["finetune"].tolist(), "embed_flops": ft_flops}

    # 6. transfer: new domains embedded with the same proxy (no retraining) vs a proxy retrained on P + N
    Xn, new_flops = px["new"]
    tr_same = chameleon_weights(np.concatenate([X, Xn]), ccfg)
    res2 = re_["train"]
    curves += [{"setting": "proxy_retrained", "metric": "proxy_loss", **c} for c in res2["curves"]]
    X2, emb2_flops = re_["embed"]
    tr_re = chameleon_weights(X2, ccfg)
    rec["transfer"] = {"domains": P + N, "weights_same_proxy": tr_same["pretrain"].tolist(),
                       "weights_retrained": tr_re["pretrain"].tolist(),
                       "S_same_proxy": tr_same["S"].tolist(), "S_retrained": tr_re["S"].tolist(),
                       "rho": krls.spearman(tr_same["pretrain"], tr_re["pretrain"]),
                       "flops_same_proxy": new_flops, "flops_retrained": res2["flops"] + emb2_flops}

    # DoReMi: Group-DRO proxy against the uniform proxy as reference
    res3 = px["doremi"]
    curves += [{"setting": "doremi_proxy", "metric": "proxy_loss", **c} for c in res3["curves"]]
    rec["doremi"] = {"weights": res3["doremi_weights"].tolist()}
    rec["flops"]["doremi"] = res["flops"] + res3["flops"]  # reference model + DRO proxy (with reference forwards)

    # DoGE: its own proxy with online gradient-alignment weights (no reference model)
    if doge is not None:
        curves += [{"setting": "doge_proxy", "metric": "proxy_loss", **c} for c in doge["curves"]]
        rec["doge"] = {"weights": doge["weights"].tolist(), "steps": doge["steps"], "tokens": doge["tokens"]}
        rec["flops"]["doge"] = doge["flops"]

    # RegMix-lite: tiny proxies on Dirichlet mixtures -> linear regression of the mean validation loss -> search
    if "regmix" in cfg:
        rm = baselines.regmix_fit(W, [out[f"regmix{r}"] for r in range(len(W))], nat, rm_rng, cfg["regmix"])
        curves += [{"setting": f"regmix_run{c['run']}", "metric": "proxy_loss", "step": c["step"], "value": c["value"]}
                   for c in rm["curves"]]
        rec["regmix"] = {"weights": rm["weights"].tolist(), "mixtures": rm["mixtures"].tolist(),
                         "val_losses": rm["val_losses"].tolist(), "target": rm["target"].tolist(),
                         "coef": rm["coef"].tolist(), "train_r2": rm["train_r2"],
                         "predicted_loss": rm["predicted_loss"]}
        rec["flops"]["regmix"] = rm["flops"]
    rec["proportional"] = {"weights": (nat / nat.sum()).tolist()}
    rec["uniform"] = {"weights": (np.ones(len(P)) / len(P)).tolist()}
    (out_dir / "weights.json").write_text(json.dumps(rec, indent=1))
    (out_dir / "curves.json").write_text(json.dumps(curves))
    np.savez(out_dir / "embeddings.npz", pretrain=X, finetune=Xft, new=Xn, retrained=X2)
    return rec
