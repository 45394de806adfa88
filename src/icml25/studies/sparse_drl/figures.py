"""sparse_drl figures: return vs width (the paper's Fig. 1), diagnostics vs width, learning curves, diagnostics
during training at the widest width."""
from __future__ import annotations

from pathlib import Path


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    from icml25.core import figures as F

    from .study import METHODS, tasks

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "sparse")
    ts = tasks(cfg)

    def xmap(name):
        # setting -> width, for the primary-sparsity settings of this task (dense includes the matched width)
        sel = agg[(agg.metric == "width") & agg.setting.str.match(rf"^{name}_w\d+$")]
        return {r.setting: float(r["mean"]) for _, r in sel.iterrows()}

    out = []
    fig, axes = F.panels(2 * len(ts), ncols=2, name="return_vs_width",
                         title=f"Return vs network width, dense vs sparse ({cfg['scale']} scale)")
    for i, (name, t) in enumerate(ts.items()):
        for j, (metric, lab) in enumerate((("return_auc", "return AUC (mean eval return)"),
                                          ("final_return", "final eval return"))):
            ax = axes[2 * i + j]
            F.lines(ax, agg, methods, metric, x=xmap(name), labels=labels, colors=colors,
                    xlabel="width (log scale)", ylabel=lab, title=f"{name} ({t['algo'].upper()})")
            ax.set_xscale("log", base=2)
    F.legend(fig)
    F.caption(fig, "Evaluation return against the hidden width of the scaled network (DQN Q-network; SAC critic) for "
                   "dense and one-shot ERK-sparse (sparsity %.1f) SimBa-lite networks; mean ± 1 std over seeds. The "
                   "dense curve has one extra width: the one whose parameters match the widest sparse network's "
                   "active parameters. The paper's Fig. 1 shows dense saturating/degrading with width and sparse "
                   "continuing to improve." % cfg["sparsity"])
    out.append(fig)

    step_diags = (("dormant_ratio", "dormant ratio (tau 0.1, pre-activation)"), ("srank", "Srank (delta 0.01)"),
                  ("param_norm", "parameter norm"), ("grad_interference", "gradient interference (actor; DQN: TD)"),
                  ("td_interference", "TD-gradient interference (ours)"), ("grad_norm", "gradient norm"))
    diags = step_diags + (("reset_probe_ratio", "reset probe (ours): trained / reset loss"),)
    for name, t in ts.items():
        fig, axes = F.panels(len(diags), ncols=3, name=f"diagnostics_{name}",
                             title=f"Diagnostics at the end of training: {name} ({t['algo'].upper()})")
        for ax, (metric, lab) in zip(axes, diags):
            F.lines(ax, agg, methods, metric, x=xmap(name), labels=labels, colors=colors,
                    xlabel="width (log scale)", ylabel=lab, title=lab)
            ax.set_xscale("log", base=2)
        F.legend(fig)
        F.caption(fig, "The paper's pathology diagnostics of the scaled network after training, mean ± 1 std over "
                       "seeds: dormant ratio over every encoder layer's pre-activation outputs, effective rank of the "
                       "penultimate features, parameter norm, mean off-diagonal cosine of per-sample actor-loss "
                       "gradients (DQN: TD gradients), the same for critic TD gradients (ours), the mean gradient "
                       "norm of the last interval's updates, and the reset probe (ours: new-task fit loss of the "
                       "trained net divided by that of a freshly reset net; > 1 means plasticity was lost).")
        out.append(fig)

    if ctx is not None:
        curves = ctx.curves()
        if not curves.empty:
            widest = [f"{name}_w{max(int(w) for w in t['widths'])}" for name, t in ts.items()]
            fig, axes = F.panels(len(widest), ncols=2, name="learning_curves",
                                 title="Evaluation return during training at the widest width")
            for ax, s in zip(axes, widest):
                F.curves(ax, curves, methods, s, "eval_return", labels=labels, colors=colors,
                         xlabel="environment steps", ylabel="eval return", title=s)
            F.legend(fig)
            F.caption(fig, "Greedy/deterministic evaluation return at each checkpoint for the widest network, mean ± 1 "
                           "std over seeds.")
            out.append(fig)
            for name, t in ts.items():
                s = f"{name}_w{max(int(w) for w in t['widths'])}"
                if curves[(curves.setting == s) & (curves.metric == "dormant_ratio")].empty:
                    continue
                fig, axes = F.panels(len(step_diags), ncols=3, name=f"diagnostics_steps_{name}",
                                     title=f"Diagnostics during training at the widest width: {s} ({t['algo'].upper()})")
                for ax, (metric, lab) in zip(axes, step_diags):
                    F.curves(ax, curves, methods, s, metric, labels=labels, colors=colors,
                             xlabel="environment steps", ylabel=lab, title=lab)
                F.legend(fig)
                F.caption(fig, "The diagnostics sampled every `diag_every` environment steps during training and at "
                               "its end (the official code samples every 5k steps), on a replay batch, for the widest "
                               "network; mean ± 1 std over seeds.")
                out.append(fig)
    return out
