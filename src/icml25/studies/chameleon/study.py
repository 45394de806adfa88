"""Chameleon study glue: hooks over data_sources / data_prep / mixing / lm, the table and the claims."""
from __future__ import annotations

import json
import time
from pathlib import Path

from icml25.core.errors import UserError
from icml25.core.registry import Claim, ClaimResult, Method, Paper, Study, lazy_hook
from icml25.tables import need

PAPER = Paper(
    title="Chameleon: A Flexible Data-mixing Framework for Language Model Pretraining and Finetuning",
    authors="Xie, Tonin, Cevher",
    arxiv="2505.24844",
    code="github.com/LIONS-EPFL/Chameleon (weight computation; LM training from DoGE)",
)

METHODS = {
    "uniform": Method("uniform", "Uniform", False, "equal domain weights"),
    "proportional": Method("proportional", "Size-proportional", False, "weights proportional to natural domain size"),
    "doremi": Method("doremi", "DoReMi", False, "Group-DRO proxy vs the uniform reference, time-averaged weights"),
    "doge": Method("doge", "DoGE", False, "proxy with online gradient-alignment domain weights, time-averaged"),
    "regmix": Method("regmix", "RegMix-lite", False,
                     "tiny proxies on Dirichlet mixtures, linear regression of validation loss, top-k search"),
    "chameleon": Method("chameleon", "Chameleon", True, "softmax((1/KRLS)/5) of proxy domain embeddings"),
}
FT_METHODS = ("uniform", "chameleon")  # the finetuning scenario: Chameleon's softmax(S/0.2) vs uniform

METRICS = {
    "test_ppl": ("held-out perplexity of the base LM per pretraining domain", "lower"),
    "avg_ppl": ("unweighted mean of the per-domain perplexities", "lower"),
    "ft_ppl": ("held-out perplexity per finetuning domain after finetuning the uniform proxy", "lower"),
    "weight": ("pretraining mixture weight of the domain", ""),
    "ft_weight": ("finetuning mixture weight of the domain", ""),
    "krls": ("normalised kernel ridge leverage score of the domain", ""),
    "weight_flops": ("FLOPs spent computing the mixture weights (6 N D training, 2 N D forward)", "lower"),
    "train_tokens": ("tokens seen by the base LM", ""),
    "train_seconds": ("wall seconds of the base LM training", "lower"),
    "sweep_weight": ("Chameleon pretraining weight at a swept lambda (setting domain@lambda)", ""),
    "sweep_rho": ("Spearman rho of swept-lambda weights vs the default lambda", "higher"),
    "transfer_rho": ("Spearman rho: weights with new domains from the same proxy vs a retrained proxy", "higher"),
    "transfer_flops": ("FLOPs to get weights for new domains (same proxy / retrained proxy)", "lower"),
    "transfer_weight": ("weights over old + new domains (setting domain@same or domain@retrained)", ""),
    "max_weight": ("largest domain weight of the pretraining mixture (saturated when above 0.9)", ""),
    "omega_eig": ("eigenvalue of the domain affinity Omega the KRLS come from (setting eig<rank>, largest first)", ""),
    "ridge": ("the ridge lambda k added to Omega (setting default, or lambda=<value> of the sweep)", ""),
    "sweep_krls": ("normalised KRLS of the domain at a swept lambda (setting domain@lambda)", ""),
    "proxy_loss": ("training loss of the uniform proxy at its end (mean of its last 5 logged batch losses)", "lower"),
    "regmix_r2": ("in-sample R^2 of RegMix-lite's linear regression over its proxy runs", "higher"),
}

# The paper's Table (SlimPajama-6B, 684M base): average perplexity and weight-compute FLOPs.
PAPER_AVG_PPL = {"uniform": 24.20, "doremi": 23.34, "chameleon": 22.31, "doge": 22.32, "regmix": 24.36}
PAPER_FLOPS = {"chameleon": 1.36e17, "doremi": 1.34e18}
SATURATED_ABOVE = 0.9  # issue 31: a mixture with a domain weight above this is marked saturated in the table


def validate(cfg: dict) -> None:
    from . import data_sources as S

    d = cfg["data"]
    P, N, ft = list(d["pretrain_domains"]), list(d["new_domains"]), list(cfg["finetune"]["domains"])
    if len(P) < 2:
        raise UserError("chameleon: need at least 2 pretraining domains")
    if set(P) & set(N):
        raise UserError(f"chameleon: domains {sorted(set(P) & set(N))} are both pretraining and new domains")
    if not set(ft) <= set(N):
        raise UserError(f"chameleon: finetuning domains {ft} must be among data.new_domains {N} (held out of pretraining)")
    known = set(S.DOMAIN_NEEDS) | (set(S.SLIMPAJAMA_SETS) if d.get("pretrain_source") == "slimpajama" else set())
    bad = [x for x in P + N if x not in known]
    if bad:
        raise UserError(f"chameleon: unknown domain(s) {bad}; known: {', '.join(sorted(known))}")
    m = cfg["model"]
    if m["d_model"] % m["n_head"]:
        raise UserError("chameleon: model.d_model must be divisible by model.n_head")
    if cfg["embed"]["ctx"] > m["ctx"] or cfg["train"]["ctx"] > m["ctx"]:
        raise UserError("chameleon: embed.ctx and train.ctx must not exceed model.ctx")


def download(cfg: dict, raw_dir: Path) -> None:
    from . import data_sources as S

    d = cfg["data"]
    if d.get("pretrain_source") == "slimpajama":
        S.download_full(d["slimpajama"], raw_dir)
        S.download(list(d["new_domains"]), raw_dir)
        return
    S.download(list(d["pretrain_domains"]) + list(d["new_domains"]), raw_dir)


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    from . import data_prep

    data_prep.preprocess(cfg["data"], raw_dir, out_dir)


def fit_base(cfg: dict, data_dir: Path, out_dir: Path) -> None:
    from . import mixing

    mixing.fit_base(cfg, data_dir, out_dir)


def _base(base_dir: Path) -> dict:
    path = base_dir / "weights.json"
    if not path.exists():
        raise UserError(f"missing {path}; run `icml25 fit-base --study chameleon` first")
    return json.loads(path.read_text())


def mixture(method: str, base: dict) -> list[float]:
    return list(base[method]["weights"])


def train(cfg, method, seed, data_dir, base_dir, run_dir) -> dict:
    import numpy as np

    from . import data_prep, lm

    meta, toks = data_prep.load(data_dir)
    base = _base(base_dir)
    P, ft = base["pretrain_domains"], base["ft_domains"]
    w = mixture(method, base)
    rows = [{"setting": d, "metric": "weight", "value": v} for d, v in zip(P, w)]
    rows.append({"setting": "pretrain", "metric": "max_weight", "value": float(max(w))})
    rows.append({"setting": "pretrain", "metric": "weight_flops", "value": base["flops"][method]})
    if method == "regmix" and base["regmix"]["train_r2"] == base["regmix"]["train_r2"]:  # not NaN
        rows.append({"setting": "regmix_fit", "metric": "regmix_r2", "value": base["regmix"]["train_r2"]})
    curves = []
    t0 = time.time()
    model = lm.build(cfg.get("base_model", cfg["model"]), int(meta["vocab_size"]), seed)
    res = lm.train(model, [toks[d]["train"] for d in P], np.asarray(w), int(cfg["base_tokens"]), cfg["train"], seed)
    lm.save(model, run_dir / "model")
    rows += [{"setting": "pretrain", "metric": "train_tokens", "value": res["tokens"]},
             {"setting": "pretrain", "metric": "train_seconds", "value": time.time() - t0}]
    curves += [{"setting": "pretrain", "metric": "train_loss", **c} for c in res["curves"]]
    if method in FT_METHODS:
        fw = base["finetune"]["weights"] if method == "chameleon" else [1.0 / len(ft)] * len(ft)
        ftm = lm.load(base_dir / "proxy")  # the uniform-trained model, finetuned (stand-in for a pretrained LM)
        r = lm.train(ftm, [toks[d]["train"] for d in ft], np.asarray(fw), int(cfg["finetune"]["tokens"]),
                     {**cfg["train"], **cfg["finetune"]["hp"]}, seed + 1000)
        lm.save(ftm, run_dir / "ft_model")
        rows += [{"setting": d, "metric": "ft_weight", "value": v} for d, v in zip(ft, fw)]
        curves += [{"setting": "finetune", "metric": "train_loss", **c} for c in r["curves"]]
    if method == "chameleon":
        ch = base["chameleon"]
        rows += [{"setting": d, "metric": "krls", "value": v} for d, v in zip(P, ch["S"])]
        rows += [{"setting": f"eig{i + 1}", "metric": "omega_eig", "value": v} for i, v in enumerate(ch["omega_eig"])]
        rows.append({"setting": "default", "metric": "ridge", "value": ch["ridge"]})
        rows.append({"setting": "proxy", "metric": "proxy_loss", "value": base["proxy_loss"]})
        for lam, s in base["sweep"].items():
            rows += [{"setting": f"{d}@{lam}", "metric": "sweep_weight", "value": v} for d, v in zip(P, s["weights"])]
            rows += [{"setting": f"{d}@{lam}", "metric": "sweep_krls", "value": v} for d, v in zip(P, s["S"])]
            rows.append({"setting": f"lambda={lam}", "metric": "sweep_rho", "value": s["rho_vs_default"]})
            rows.append({"setting": f"lambda={lam}", "metric": "ridge", "value": s["ridge"]})
        tr = base["transfer"]
        rows.append({"setting": "transfer", "metric": "transfer_rho", "value": tr["rho"]})
        rows.append({"setting": "same_proxy", "metric": "transfer_flops", "value": tr["flops_same_proxy"]})
        rows.append({"setting": "retrained", "metric": "transfer_flops", "value": tr["flops_retrained"]})
        for key, tag in (("weights_same_proxy", "same"), ("weights_retrained", "retrained")):
            rows += [{"setting": f"{d}@{tag}", "metric": "transfer_weight", "value": v} for d, v in zip(tr["domains"], tr[key])]
    return {"metrics": rows, "curves": curves}


def evaluate(cfg, method, seed, data_dir, base_dir, run_dir) -> list:
    """Held-out perplexities (test blocks, never trained on) of the saved models, loaded with from_pretrained."""
    from . import data_prep, lm

    meta, toks = data_prep.load(data_dir)
    base = _base(base_dir)
    ctx, nw = int(cfg["train"]["ctx"]), int(cfg["eval"]["windows"])
    model = lm.load(run_dir / "model")
    rows, ppls = [], []
    for d in base["pretrain_domains"]:
        p = lm.perplexity(model, toks[d]["test"], ctx, nw)
        ppls.append(p)
        rows.append({"setting": d, "metric": "test_ppl", "value": p})
    rows.append({"setting": "pretrain", "metric": "avg_ppl", "value": sum(ppls) / len(ppls)})
    if (run_dir / "ft_model").exists() and method in FT_METHODS:
        ftm = lm.load(run_dir / "ft_model")
        for d in base["ft_domains"]:
            rows.append({"setting": d, "metric": "ft_ppl", "value": lm.perplexity(ftm, toks[d]["test"], ctx, nw)})
    return rows


# ---- table and claims ---------------------------------------------------------------------------------

def _cell(agg, m, s, metric):
    from icml25.tables import lookup

    return lookup(agg, m, s, metric)


def n_beat_uniform(agg, method, domains) -> int:
    return sum(need(agg, method, d, "test_ppl")[0] < need(agg, "uniform", d, "test_ppl")[0] for d in domains)


def saturation_mark(weights: dict[str, float], above: float = SATURATED_ABOVE) -> str:
    """The table's saturation column: which domain holds more than `above` of a mixture, if one does."""
    if not weights:
        return ""
    d, w = max(weights.items(), key=lambda kv: kv[1])
    return f"yes: {d} {w:.3f}" if w > above else f"no (max {w:.2f})"


def make_table(agg, cfg):
    import math

    import pandas as pd

    from icml25.tables import fmt

    sat_col = f"saturated (w > {SATURATED_ABOVE})"
    P = list(cfg["data"]["pretrain_domains"])
    ft = list(cfg["finetune"]["domains"])
    rows = []
    for m in cfg["methods"]:
        row = {"method": METHODS[m].label}
        for d in P:
            c = _cell(agg, m, d, "test_ppl")
            row[d] = fmt(c[0], c[1], 1) if c else "–"
        c = _cell(agg, m, "pretrain", "avg_ppl")
        row["avg PPL"] = fmt(c[0], c[1], 2) if c else "–"
        try:
            row["beats uniform"] = f"{n_beat_uniform(agg, m, P)}/{len(P)}" if m != "uniform" else ""
        except KeyError:
            row["beats uniform"] = "–"
        c = _cell(agg, m, "pretrain", "weight_flops")
        row["weight FLOPs"] = f"{c[0]:.2e}" if c else "–"
        for d in ft:
            c = _cell(agg, m, d, "ft_ppl")
            row[f"FT {d}"] = fmt(c[0], c[1], 1) if c else ""
        row[sat_col] = ""
        rows.append(row)
    cols = list(rows[0]) if rows else []

    for m in cfg["methods"]:  # the mixtures themselves, marked when one domain holds more than 0.9
        row = dict.fromkeys(cols, "")
        row["method"] = f"weights: {METHODS[m].label}"
        ws = {}
        for d in P:
            c = _cell(agg, m, d, "weight")
            row[d] = f"{c[0]:.3f}" if c else "–"
            if c:
                ws[d] = c[0]
        for d in ft:
            c = _cell(agg, m, d, "ft_weight")
            row[f"FT {d}"] = f"{c[0]:.3f}" if c else ""
        row[sat_col] = saturation_mark(ws)
        rows.append(row)
    if "chameleon" in cfg["methods"]:  # issue 31: the lambda sweep's mixtures, the scores, the spectrum
        lam0 = cfg["chameleon"]["lambda"]
        for lam in cfg["chameleon"]["lambda_sweep"]:
            for metric, label in (("sweep_weight", "weights"), ("sweep_krls", "KRLS")):
                row = dict.fromkeys(cols, "")
                row["method"] = f"Chameleon {label} at λ={lam}" + (" (the runs' λ)" if lam == lam0 else "")
                ws = {}
                for d in P:
                    c = _cell(agg, "chameleon", f"{d}@{lam}", metric)
                    row[d] = f"{c[0]:.3f}" if c else "–"
                    if c:
                        ws[d] = c[0]
                if metric == "sweep_weight":
                    row[sat_col] = saturation_mark(ws)
                rows.append(row)
        eig = [_cell(agg, "chameleon", f"eig{i + 1}", "omega_eig") for i in range(len(P))]
        if any(eig):
            ridge = _cell(agg, "chameleon", "default", "ridge")
            loss = _cell(agg, "chameleon", "proxy", "proxy_loss")
            row = dict.fromkeys(cols, "")
            row["method"] = ("Ω eigenvalues, largest first (columns by rank, not domain)"
                             + (f"; ridge λk = {ridge[0]:.2f}" if ridge else "")
                             + (f"; proxy loss {loss[0]:.2f} (ln V = {math.log(cfg['data']['vocab_size']):.2f})"
                                if loss else ""))
            for d, c in zip(P, eig):
                row[d] = f"{c[0]:.3g}" if c else "–"
            rows.append(row)
    for m in ("uniform", "doremi", "doge", "regmix", "chameleon"):
        row = dict.fromkeys(cols, "")
        row["method"] = f"paper: {m} (SlimPajama-6B, 684M)"
        row["avg PPL"] = f"{PAPER_AVG_PPL[m]:.2f}"
        row["weight FLOPs"] = f"{PAPER_FLOPS[m]:.2e}" if m in PAPER_FLOPS else ""
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


# Margins: perplexity claims pair the two methods seed by seed (each seed trains both base LMs and both
# finetuned models); the FLOPs and transfer claims rest on one computation in fit_base (base_seed), the
# same for every seed, so they carry a pooled margin and no interval.

def _gap_by_seed(agg, a, b, setting, metric) -> dict[int, float]:
    """{seed: a's value - b's value} of one cell, over the seeds both methods have."""
    from icml25.core import evidence

    va, vb = evidence.seed_values(agg, a, setting, metric), evidence.seed_values(agg, b, setting, metric)
    return {s: va[s] - vb[s] for s in sorted(set(va) & set(vb))}


def claim_flops(agg, cfg):
    c = need(agg, "chameleon", "pretrain", "weight_flops")[0]
    d = need(agg, "doremi", "pretrain", "weight_flops")[0]
    extra = ""
    for m, label in (("doge", "DoGE"), ("regmix", "RegMix-lite")):  # context only: the paper's claim is vs DoReMi
        o = _cell(agg, m, "pretrain", "weight_flops") if m in cfg["methods"] else None
        if o:
            extra += f"; {label} {o[0]:.2e} (Chameleon/{label} {c / o[0]:.2f})"
    # margin: the share of DoReMi's FLOPs that Chameleon saves, 1 - c/d (> 0 exactly when c < d)
    return ClaimResult.of(f"Chameleon {c:.2e} vs DoReMi {d:.2e} FLOPs (ratio {c / d:.2f}; paper 0.10){extra}",
                          margin=1.0 - c / d, unit="1 - FLOPs ratio")


def claim_avg_ppl(agg, cfg):
    c, cs, n = need(agg, "chameleon", "pretrain", "avg_ppl")
    u, us, _ = need(agg, "uniform", "pretrain", "avg_ppl")
    P = list(cfg["data"]["pretrain_domains"])
    k = n_beat_uniform(agg, "chameleon", P)
    per_seed = _gap_by_seed(agg, "uniform", "chameleon", "pretrain", "avg_ppl")
    return ClaimResult.of(f"avg PPL Chameleon {c:.2f} ± {cs:.2f} vs uniform {u:.2f} ± {us:.2f} ({n} seeds); "
                          f"Chameleon better on {k}/{len(P)} domains", unit="PPL (uniform - Chameleon)",
                          per_seed=per_seed)


def claim_finetune(agg, cfg):
    from icml25.core import evidence

    parts, diffs = [], []
    for d in cfg["finetune"]["domains"]:
        c = need(agg, "chameleon", d, "ft_ppl")[0]
        u = need(agg, "uniform", d, "ft_ppl")[0]
        parts.append(f"{d} {c:.1f} vs {u:.1f}")
        diffs.append(_gap_by_seed(agg, "uniform", "chameleon", d, "ft_ppl"))
    return ClaimResult.of("; ".join(parts), unit="PPL (uniform - Chameleon), worst domain",
                          per_seed=evidence.combine(diffs, min))


def claim_transfer(agg, cfg):
    rho = need(agg, "chameleon", "transfer", "transfer_rho")[0]
    same = need(agg, "chameleon", "same_proxy", "transfer_flops")[0]
    re_ = need(agg, "chameleon", "retrained", "transfer_flops")[0]
    from icml25.core import evidence

    thr = float(cfg["claims"]["transfer_rho_min"])
    # rho comes from the seed's base models (one per seed where base_per_seed): its spread over seeds is the
    # base models' randomness, so the margin's interval is taken over the seeds
    per = [v - thr for _, v in sorted(evidence.seed_values(agg, "chameleon", "transfer", "transfer_rho").items())]
    return ClaimResult.of(f"Spearman rho {rho:.2f} (threshold {thr}) at {same:.2e} vs {re_:.2e} FLOPs with retraining",
                          unit="Spearman rho - threshold", per_seed=per)


STUDY = Study(
    name="chameleon",
    paper=PAPER,
    methods=METHODS,
    metrics=METRICS,
    download=download,
    preprocess=preprocess,
    fit_base=fit_base,
    train=train,
    evaluate=evaluate,
    make_table=make_table,
    validate=validate,
    figures=lazy_hook("icml25.studies.chameleon.figures", "figures"),
    claims=[
        Claim("flops", "Chameleon's weight computation costs a fraction of DoReMi's (logged FLOPs)",
              "1.36e17 vs 1.34e18 FLOPs", claim_flops),
        Claim("avg_ppl", "Chameleon's average perplexity <= uniform's", "22.31 vs 24.20 (SlimPajama, 684M)",
              claim_avg_ppl),
        Claim("finetune", "Chameleon finetuning weights beat uniform on every finetuning domain",
              "lower test PPL on all finetuning domains", claim_finetune),
        Claim("transfer", "Weights recomputed for new domains without proxy retraining agree with a retrained proxy's",
              "transfer without retraining", claim_transfer),
    ],
    stand_ins={
        "smoke": "Python-stdlib text domains (source, pydoc topics, licence, docstrings) and a tiny GPT-2; "
                 "numbers are meaningless (tests only).",
        "mini": "7 offline text domains for SlimPajama's 7 (Wikipedia excerpt from the gensim wheel; Austen + Gutenberg "
                "books from Debian R packages; CPython stdlib source; GCIDE; FOLDOC + Jargon File; fortunes; licence "
                "texts), new/finetuning domains Shakespeare, KJV Bible, WordNet glosses; a byte-level BPE (4096) and "
                "0.85M-parameter GPT-2 proxies and base LMs (0.2M tokens each); the uniform proxy stands in for "
                "the pretrained model that is finetuned. DoGE: 0.2M-token proxy, stratified batches (2 windows per "
                "domain per step). RegMix-lite: 16 proxies x 12.5k tokens on Dirichlet mixtures and a linear regression "
                "(not the paper's LightGBM over 512 runs) of the mean validation loss (last 10% of each domain's "
                "training tokens), mixture = mean of the top 100 of 100k Dirichlet samples.",
        "full": "SlimPajama-6B's 7 domains, 82M proxy, 684M base LM (GPU); same code path.",
    },
)
