"""Figures: linear-probe AUC against the label fraction per method; zero-shot AUC per method on the test
and the shifted test set; the pretraining loss curves."""
from __future__ import annotations


def figures(agg, cfg, out_dir, ctx=None) -> list:
    from icml25.core import figures as F

    from .study import METHODS, PAPER_ROWS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "dbeta")
    out = []
    x = {f"lp{float(f) * 100:g}": float(f) * 100 for f in cfg["eval"]["fractions"]}
    fig, (ax,) = F.panels(1, ncols=1, name="linear_probe", title=f"Linear probe against label fraction ({cfg['scale']})")
    F.lines(ax, agg, methods, "auc", x, labels=labels, colors=colors, xlabel="labelled downstream records (%)",
            ylabel="macro AUC (test)", logx=True, title="linear probe on frozen features")
    F.legend(fig, ncols=3)
    F.caption(fig, "Macro ROC AUC of logistic-regression probes on frozen ECG features with 1%, 10% and 100% of the "
                   "downstream training labels (the same labelled subsets for every method at a seed); the supervised "
                   "arm is the encoder trained from scratch on the 1% labels (one point). " + F.SPREAD +
                   f". The paper's means (6 datasets, D-BETA {PAPER_ROWS['dbeta']['lp1']}% / MERL "
                   f"{PAPER_ROWS['clip']['lp1']}% at 1%) are on real data and not drawn.")
    out.append(fig)
    zs = [m for m in methods if not agg[(agg.method == m) & (agg.setting == "zs")].empty]
    if zs:
        fig, axes = F.panels(2, ncols=2, name="zero_shot", title="Zero-shot macro AUC per method")
        for ax, (s, t) in zip(axes, (("zs", "test set (in distribution)"), ("zs_shift", "shifted test set"))):
            F.bars(ax, agg, zs, s, "auc", labels=labels, colors=colors, paper_method="dbeta", ylabel="macro AUC",
                   title=t)
            F.reference(ax, 0.5, label="chance (0.5)", color="#777777")
        F.legend(fig, ncols=3)
        F.caption(fig, "Zero-shot: cosine between the ECG feature and the text feature of each label's prompt "
                       "(prompts worded unlike any report template), macro AUC over the labels, on the test set and on "
                       "the shifted set (other heart rates, twice the noise, other lead gains). The random-init arm "
                       "uses the untrained towers; the ECG-only MAE has no text tower. " + F.SPREAD + ".")
        out.append(fig)
    if ctx is not None:
        cur = ctx.curves()
        cur = cur[cur.value.notna()].astype({"step": int, "value": float})  # arms without a curve add empty object columns
        arms = [m for m in methods if m in set(cur.method)] if cur is not None and len(cur) else []
        if arms:
            fig, (ax,) = F.panels(1, ncols=1, name="pretrain_loss", title="Pretraining loss per arm")
            F.curves(ax, cur, arms, "train", "train_loss", labels=labels, colors=colors, ylabel="loss (sum of the arm's terms)")
            F.legend(fig, ncols=3)
            F.caption(fig, "Training loss against step (each arm's own objective, so levels are not comparable "
                           "across arms). " + F.SPREAD + ".")
            out.append(fig)
    return out
