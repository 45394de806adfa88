"""Figures through the shared helper: test accuracy per method (the real examples as a line), the training
set's perplexity against accuracy, and the gradient cosine against the ADMM outer iteration."""
from __future__ import annotations

from pathlib import Path


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    import numpy as np

    from icml25.core import figures as F

    from .study import METHODS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "gradmm")
    out = []

    fig, (ax,) = F.panels(1, name="test_accuracy", title=f"Test accuracy per method ({cfg['scale']} scale)",
                          size=(5.0, 3.2))
    shown = [m for m in methods if m != "real"]
    F.bars(ax, agg, shown, "test", "test_acc", labels=labels, colors=colors, paper_method="gradmm",
           ylabel="test accuracy (%)", title="fine-tuned on each training set")
    real = agg[(agg.method == "real") & (agg.setting == "test") & (agg.metric == "test_acc")]
    if not real.empty:
        F.reference(ax, float(real["mean"].iloc[0]), label=f"{labels.get('real', 'real')}: {float(real['mean'].iloc[0]):.1f}%")
    F.legend(fig, ncols=3)
    F.caption(fig, "Accuracy on the held-out real test snippets of the LM fine-tuned as a classifier on each "
                   "method's training set (zero-shot: no fine-tuning). Dashed line: fine-tuning on the matched real "
                   "examples. " + F.SPREAD + ".")
    out.append(fig)

    fig, (ax,) = F.panels(1, name="perplexity_vs_accuracy", title="Training-set perplexity against test accuracy",
                          size=(5.0, 3.2))
    drawn = 0
    for m in methods:
        acc = agg[(agg.method == m) & (agg.setting == "test") & (agg.metric == "test_acc")]
        ppl = agg[(agg.method == m) & (agg.setting == "set") & (agg.metric == "syn_ppl")]
        if acc.empty or ppl.empty:
            continue
        ax.errorbar([float(ppl["mean"].iloc[0])], [float(acc["mean"].iloc[0])], xerr=[float(ppl["std"].iloc[0])],
                    yerr=[float(acc["std"].iloc[0])], fmt="o", color=colors[m], label=labels[m], capsize=3)
        drawn += 1
    if drawn:
        ax.set_xscale("log")
    ax.set_xlabel("perplexity of the training texts under the base LM (log)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("readability vs utility")
    F.legend(fig, ncols=3)
    F.caption(fig, "Each point: one method's training set, its perplexity under the base LM (lower = more "
                   "readable to that LM) against the accuracy of the LM fine-tuned on it. " + F.SPREAD + ".")
    if drawn:
        out.append(fig)

    if ctx is not None:
        cur = ctx.curves()
        cur = cur[cur.metric == "grad_cos_proj"]
        if not cur.empty:
            fig, (ax,) = F.panels(1, name="grad_cos_vs_iteration",
                                  title="Gradient cosine of the projected text against the outer iteration",
                                  size=(5.0, 3.2))
            for m in [m for m in methods if m in set(cur.method)]:
                part = cur[cur.method == m]
                # per seed: mean over the two classes at each step
                per_seed = part.groupby(["seed", "step"])["value"].mean().unstack("step")
                F.band(ax, np.asarray(per_seed.columns, float), per_seed.values, label=labels[m], color=colors[m],
                       xlabel="outer iteration (0: projection of the random init)",
                       ylabel="cos(grad of text, g)")
            F.legend(fig, ncols=3)
            F.caption(fig, "Cosine between the lm_head gradient of each candidate batch's projected tokens and the "
                           "target g, averaged over batches and the two classes, after each outer iteration (GRADMM: "
                           "LM-guided top-k projection of x; embedding matching: nearest-token map of x after the "
                           "same number of inner steps). GRADMM-DP is measured against its own noisy target. "
                           + F.SPREAD + ".")
            out.append(fig)
    return out
