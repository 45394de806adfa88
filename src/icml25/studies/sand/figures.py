"""SAND's figures (the paper's Table 2 as bars, the gain vector, training curves), via icml25.core.figures."""
from __future__ import annotations

from pathlib import Path


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    import numpy as np

    from icml25.core import figures as F

    from .study import METHODS, PAPER_NUMBERS, _is_reg

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "sand")
    names = list(cfg["data"]["datasets"])

    def ylabel(name):
        return "test MAE, train-std units (lower better)" if _is_reg(cfg, name) else "test accuracy"

    # 1. Accuracy (MAE) vs method, one panel per dataset; the paper's numbers as stars.
    acc, axes = F.panels(len(names), name="accuracy_by_method",
                         title=f"SAND vs baselines at k selected features ({cfg['scale']} scale)")
    for ax, name in zip(axes, names):
        paper = {m: v for (m, d), v in PAPER_NUMBERS.items() if d == name and m in methods}
        F.bars(ax, agg, methods, name, "test_metric", labels=labels, colors=colors, paper=paper or None,
               paper_label="paper, full data", ylabel=ylabel(name), title=f"{name} (k={cfg['k'][name]})")
    F.legend(acc, ncols=3)
    F.caption(acc, "Test accuracy (MAE for regression) per dataset and method at k selected features: bars are "
                   "the mean over seeds, error bars ± 1 std over seeds, dots the seeds; stars are the paper's "
                   "numbers on its full datasets (not our stand-ins). SAND is evaluated without retraining; "
                   "every baseline retrains an MLP on its k features.")
    out = [acc]

    # 2. The gain vector: SAND's learned gains sorted in decreasing order, mean ± std over seeds; k marked.
    if ctx is not None and "sand" in methods:
        sel = ctx.per_run("selection.json", methods=["sand"])
        have = [n for n in names if any(s.get(n, {}).get("gains") is not None for s in sel.values())]
        if have:
            gains, axes = F.panels(len(have), name="sand_gains", title="SAND gain vector (sorted)")
            for ax, name in zip(axes, have):
                runs = [np.sort(np.asarray(s[name]["gains"], dtype=float))[::-1] for s in sel.values() if name in s]
                F.band(ax, np.arange(1, len(runs[0]) + 1), np.vstack(runs), label=labels["sand"],
                       color=colors["sand"], xlabel="feature rank", ylabel="gain |a_i|",
                       title=f"{name} (k={cfg['k'][name]})")
                F.reference(ax, cfg["k"][name] + 0.5, label="k (features kept)", axis="v")
                ax.set_xscale("log")
                ax.set_ylim(0, max(1.05, float(np.max(runs)) * 1.05))  # polarisation reads against 0 and 1
            F.legend(gains)
            F.caption(gains, "SAND's gains a (sum a^2 = k) after training, sorted in decreasing order: mean ± 1 std "
                             "over seeds; the dashed line marks k. The paper reports gains that polarise: about "
                             "k gains near 1 and the rest near 0.")
            out.append(gains)

    # 3. Training loss curves of every method, mean ± std over seeds.
    if ctx is not None:
        curves = ctx.curves()
        if not curves.empty:
            fig, axes = F.panels(len(names), name="train_loss", title="Training loss per epoch")
            for ax, name in zip(axes, names):
                F.curves(ax, curves, methods, name, "train_loss", labels=labels, colors=colors,
                         xlabel="epoch", ylabel="training loss", title=name)
            F.legend(fig, ncols=3)
            F.caption(fig, "Training loss per epoch, mean ± 1 std over seeds. For SAND this is the one training run "
                           "(with noise); for the baselines it is the retraining on the k selected features.")
            out.append(fig)
    return out
