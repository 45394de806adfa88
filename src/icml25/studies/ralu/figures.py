"""Figures: accuracy per method on each evaluation set; tokens per problem against accuracy; units per
problem and fix rate (RaLU variants)."""
from __future__ import annotations

from pathlib import Path


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    from icml25.core import figures as F

    from .study import METHODS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "ralu")
    sets = list(cfg["data"]["sets"])
    main = cfg["claims"]["setting"]
    out = []

    fig, axes = F.panels(len(sets), name="accuracy", title=f"Executed-answer accuracy per method ({cfg['scale']} scale)")
    for ax, s in zip(axes, sets):
        F.bars(ax, agg, methods, s, "accuracy", labels=labels, colors=colors, paper_method="ralu",
               ylabel="accuracy (%)", title=s)
    F.legend(fig, ncols=3)
    F.caption(fig, "Accuracy of the executed final program per method and evaluation set (self-consistency: the "
                   "majority answer of k programs). " + F.SPREAD + ". The LLM is the stand-in trained in the "
                   "pipeline at mini scale: gsm_lite uses training templates with new numbers, gsm_lite_heldout "
                   "unseen clause combinations, gsm_symbolic real GSM8K-derived templates (words the model never "
                   "saw, so near-zero accuracy: the scale gap).")
    out.append(fig)

    fig, (ax,) = F.panels(1, name="tokens_vs_accuracy", title=f"Tokens per problem against accuracy ({main})")
    drawn = []
    for m in methods:
        a = agg[(agg.method == m) & (agg.setting == main) & (agg.metric == "accuracy")]
        t = agg[(agg.method == m) & (agg.setting == main) & (agg.metric == "tokens")]
        if a.empty or t.empty:
            continue
        ax.errorbar([float(t["mean"].iloc[0])], [float(a["mean"].iloc[0])], xerr=[float(t["std"].iloc[0])],
                    yerr=[float(a["std"].iloc[0])], marker="o", color=colors[m], label=labels[m], capsize=2, ls="none")
        drawn.append(m)
    ax.set_xscale("log")
    ax.set_xlabel("generated tokens per problem (log)")
    ax.set_ylabel("accuracy (%)")
    F._expect(ax, drawn, "scatter")
    F.legend(fig, ncols=2)
    F.caption(fig, f"Accuracy against generated tokens per problem (all LLM calls) on {main}; mean ± std over seeds. "
                   "RaLU spends one judge call per logic unit (and up to max_branches more per rejected unit) plus "
                   "the synthesis call.")
    out.append(fig)

    variants = [m for m in methods if m.startswith("ralu") or m == "self_refine"]
    fig, axes = F.panels(2, name="units_fix_rate", title=f"Logic units per problem and fix rate ({main})")
    F.bars(axes[0], agg, variants, main, "units", labels=labels, colors=colors, paper_method="ralu",
           ylabel="units per problem", title="units judged per problem")
    F.bars(axes[1], agg, variants, main, "fix_rate", labels=labels, colors=colors, paper_method="ralu",
           ylabel="fix rate", title="share of units changed by alignment")
    F.legend(fig, ncols=2)
    F.caption(fig, "Left: logic units judged per problem (CFG units, program lines, or the whole program as one unit "
                   "for self-refine). Right: share of judged units whose aligned version differs from the program's "
                   "own unit. " + F.SPREAD + ".")
    out.append(fig)
    return out
