"""Chameleon's figures: per-domain perplexity by mixture, the mixtures, the lambda sweep, the transfer weights."""
from __future__ import annotations

from pathlib import Path


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    from icml25.core import figures as F

    from .study import METHODS, PAPER_AVG_PPL

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "chameleon")
    P = list(cfg["data"]["pretrain_domains"])
    out = []

    def relative(metric: str, out_metric: str):
        """Per-setting ratio to uniform's mean (seed values divided too): mixture effects are a few percent."""
        rows = agg[agg.metric == metric].copy()
        for s in rows.setting.unique():
            u = rows[(rows.method == "uniform") & (rows.setting == s)]
            if u.empty:
                continue
            ref = float(u["mean"].iloc[0])
            m = rows.setting == s
            rows.loc[m, "mean"] = rows.loc[m, "mean"] / ref
            rows.loc[m, "std"] = rows.loc[m, "std"] / ref
            rows.loc[m, "values"] = rows.loc[m, "values"].apply(lambda v: [x / ref for x in v])
        rows["metric"] = out_metric
        return rows

    import pandas as pd

    rel = pd.concat([relative("test_ppl", "ppl_rel"), relative("avg_ppl", "ppl_rel"), relative("ft_ppl", "ft_rel")])

    # 1. held-out perplexity per domain + average, relative to uniform
    fig, axes = F.panels(len(P) + 1, ncols=4, name="test_ppl",
                         title=f"Held-out perplexity relative to uniform ({cfg['scale']} scale)")
    for ax, d in zip(axes, P + ["pretrain"]):
        F.bars(ax, rel, methods, d, "ppl_rel", labels=labels, colors=colors, ylabel="PPL / uniform PPL",
               title="average PPL" if d == "pretrain" else d)
        F.reference(ax, 1.0, label="uniform")
    F.legend(fig, ncols=4)
    F.caption(fig, "Held-out (test-block) perplexity of base LMs trained with the same token budget on each mixture, "
                   "divided by the uniform mixture's mean perplexity on that domain (below 1 = better than uniform): "
                   "bars are the mean over seeds, error bars ± 1 std, dots the seeds. Paper (SlimPajama-6B, 684M): "
                   f"average PPL {', '.join(f'{m} {v}' for m, v in PAPER_AVG_PPL.items())}.")
    out.append(fig)

    ft = list(cfg["finetune"]["domains"])
    ftm = [m for m in methods if m in ("uniform", "chameleon")]
    if len(ftm) == 2 and not rel[rel.metric == "ft_rel"].empty:
        fig, axes = F.panels(len(ft), name="finetune", title="Finetuning: test perplexity relative to uniform weights")
        for ax, d in zip(axes, ft):
            F.bars(ax, rel, ftm, d, "ft_rel", labels=labels, colors=colors, ylabel="PPL / uniform PPL", title=d)
            F.reference(ax, 1.0, label="uniform")
        F.legend(fig)
        F.caption(fig, "Finetuning the uniform-mixture proxy on the held-out domains with Chameleon's softmax(KRLS/0.2) "
                       "weights vs uniform weights, same token budget: test perplexity divided by uniform's mean.")
        out.append(fig)

    # 2. the mixtures
    fig, axes = F.panels(len(P), name="weights", title="Domain weights per method")
    for ax, d in zip(axes, P):
        F.bars(ax, agg, methods, d, "weight", labels=labels, colors=colors, ylabel="weight", title=d)
    F.legend(fig, ncols=4)
    F.caption(fig, "Pretraining mixture weights per domain and method (uniform, natural sizes, DoReMi's time-averaged "
                   "Group-DRO weights, DoGE's time-averaged gradient-alignment weights, RegMix-lite's regression-"
                   "searched mixture, Chameleon's softmax((1/KRLS)/5)).")
    out.append(fig)

    # 3. lambda sweep (Chameleon)
    lams = list(cfg["chameleon"]["lambda_sweep"])
    if "chameleon" in methods:
        fig, axes = F.panels(1, name="lambda_sweep", title="Chameleon weights vs lambda")
        ax = axes[0]
        _per_lambda_lines(ax, agg, P, lams, "sweep_weight")
        ax.set_xlabel("lambda (trace-normalised Omega)")
        ax.set_ylabel("pretraining weight")
        F.legend(fig, ncols=4)
        F.caption(fig, "Chameleon's pretraining weights for each swept lambda (one line per domain); the table's "
                       f"runs use lambda={cfg['chameleon']['lambda']}.")
        out.append(fig)

    # 4. issue 31: the spectrum of Omega against the ridge, and the scores per lambda (why the weights saturate)
    eig = agg[(agg.method == "chameleon") & (agg.metric == "omega_eig")]
    if "chameleon" in methods and not eig.empty:
        eig = eig.assign(rank=eig.setting.str.slice(3).astype(int)).sort_values("rank")
        fig, axes = F.panels(2, name="krls_spectrum", title="Chameleon: spectrum of Omega and the KRLS per lambda")
        ax = axes[0]
        ax.plot(eig["rank"], eig["mean"].clip(lower=1e-12), marker="o", color="black", label="eigenvalue of Omega")
        k = len(P)
        for lam in lams:
            ax.axhline(float(lam) * k, ls=":", lw=1, color="grey")
            ax.annotate(f"λk, λ={lam}", (k, float(lam) * k), fontsize=7, ha="right", va="bottom")
        ax.set_yscale("log")
        ax.set_xlabel("rank")
        ax.set_ylabel("eigenvalue (trace-normalised Omega)")
        ax = axes[1]
        _per_lambda_lines(ax, agg, P, lams, "sweep_krls")
        ax.set_xlabel("lambda")
        ax.set_ylabel("normalised KRLS")
        F.legend(fig, ncols=4)
        F.caption(fig, "Left: eigenvalues of the centred, trace-normalised domain affinity Omega that the scores "
                       "come from, largest first, against the ridge lambda k of each swept lambda (a direction "
                       "separates domains only where its eigenvalue exceeds lambda k). Right: each domain's "
                       "normalised kernel ridge leverage score per lambda; the pretraining weight is "
                       "softmax((1/S)/5), so the smallest score takes the mixture.")
        out.append(fig)
    return out


def _per_lambda_lines(ax, agg, domains, lams, metric):
    """One line per domain: Chameleon's `metric` at each swept lambda (settings '<domain>@<lambda>'), log x."""
    for d in domains:
        vals = [agg[(agg.method == "chameleon") & (agg.setting == f"{d}@{lam}") & (agg.metric == metric)]["mean"]
                for lam in lams]
        if all(len(v) for v in vals):
            ax.plot(lams, [float(v.iloc[0]) for v in vals], marker="o", label=d)
    ax.set_xscale("log")
