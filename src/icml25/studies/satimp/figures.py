"""SatImp's figures via icml25.core.figures: calibrated forget ES per method, SimSat's granularity and beta
sweep, and the forget NLL during unlearning."""
from __future__ import annotations

from pathlib import Path


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    from icml25.core import figures as F

    from .study import METHODS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "satimp")
    split = cfg["data"]["forget_splits"][-1]
    out = []

    fig, axes = F.panels(3, name="calibrated_forget_es", title=f"Forget ES at matched retain ES ({cfg['scale']} scale)")
    for ax, (metric, yl) in zip(axes, [("cal_es_forget", "forget ES, exact ↓"),
                                       ("cal_es_forget_para", "forget ES, paraphrased ↓"),
                                       ("cal_alpha", "share α of the update kept")]):
        F.bars(ax, agg, methods, split, metric, labels=labels, colors=colors, ylabel=yl, title=f"{split}: {metric}")
    F.legend(fig, ncols=4)
    F.caption(fig, "Each method's unlearned model is mixed with the original (θ = θ0 + α Δθ) at the largest α on "
                   "the grid whose retain-eval ES is >= 0.9 x the original's (the official bar); bars: forget ES there (mean over "
                   "seeds, ± 1 std, dots: seeds). The paper's TOFU tables were not retrievable offline, so no "
                   "paper marks are drawn.")
    out.append(fig)

    if "simsat" in methods:
        var = cfg.get("variants", {}).get("simsat", {})
        beta0 = float(cfg.get("hp", {}).get("simsat", {}).get("beta", 1.0))
        betas = {split: beta0, **{f"{split}|{k}": float(k[5:]) for k in var if k.startswith("beta_")}}
        gran = {split: 0.0, **{f"{split}|{k}": float(i) for i, k in
                               enumerate(("group", "instance", "batch"), start=1) if k in var}}
        fig, axes = F.panels(2, ncols=2, name="simsat_smoothness_granularity",
                             title="SimSat: smoothness (β) and granularity of the weights")
        F.lines(axes[0], agg, ["simsat"], "cal_es_forget", x=betas, labels=labels, colors=colors, xlabel="β of w = p^β",
                ylabel="calibrated forget ES", title="β sweep", logx=True)
        F.lines(axes[1], agg, ["simsat"], "cal_es_forget", x=gran, labels=labels, colors=colors,
                xlabel="granularity: 0 token, 1 group, 2 instance, 3 batch", ylabel="calibrated forget ES",
                title="granularity")
        F.legend(fig)
        F.caption(fig, "SimSat's calibrated forget ES (mean ± 1 std over seeds) against β (smoothness) and against the "
                       "granularity at which the weight is computed; every point at the same unlearning lr (the "
                       "official protocol: one lr, chosen by GA on the validation authors).")
        out.append(fig)

    if ctx is not None:
        curves = ctx.curves()
        if not curves.empty:
            fig, axes = F.panels(1, ncols=1, name="forget_nll", title="Forget NLL per unlearning step")
            F.curves(axes[0], curves, methods, split, "forget_nll", labels=labels, colors=colors,
                     xlabel="step", ylabel="mean NLL of the forget minibatch", title=split)
            F.legend(fig, ncols=4)
            F.caption(fig, "Mean token NLL of each forget minibatch during unlearning (at the shared lr chosen by GA on "
                           "the validation authors), mean ± 1 std over seeds.")
            out.append(fig)
    return out
