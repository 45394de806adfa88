"""missing_sm figures (the paper's Figs. 1, 3, 4 as curves), via icml25.core.figures."""
from __future__ import annotations


def figures(agg, cfg, out_dir):
    from icml25.core import figures as F

    from .study import METHODS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "marg_var")
    out = []
    graphs = [g for g in ("star", "dense") if any(agg.setting.str.startswith(f"{g}_p"))]
    if graphs:
        fig, axes = F.panels(len(graphs), name="auc_vs_pmiss", title="Edge recovery (ROC AUC over the γ path)")
        for ax, g in zip(axes, graphs):
            x = {s: float(s.split("_p")[1]) for s in agg.setting.unique() if s.startswith(f"{g}_p")}
            F.lines(ax, agg, methods, "auc", x, labels=labels, colors=colors, xlabel="p_miss (MCAR)",
                    ylabel="AUC", title=f"{g} graph")
        F.legend(fig)
        F.caption(fig, "ROC AUC of the estimated graph against the true edges, per missingness rate: mean over "
                       "seeds ± 1 std. The paper (Figs. 3-4): Marg-Var best on the star graph, less clearly on "
                       "the dense one; full-data SM is the oracle.")
        out.append(fig)
    its = {s: float(s[len("gauss_it"):]) for s in agg.setting.unique() if s.startswith("gauss_it")}
    if its:
        fig, axes = F.panels(1, name="fisher_vs_iteration", title="Gaussian parameter estimation")
        F.lines(axes[0], agg, methods, "fisher_div", its, labels=labels, colors=colors, xlabel="iteration",
                ylabel="Fisher divergence to the truth", title="p_miss 0.2")
        axes[0].set_yscale("log")
        F.legend(fig)
        F.caption(fig, "Fisher divergence of the fitted Gaussian to the truth (fresh complete samples) against "
                       "iterations: mean over seeds ± 1 std. The paper: Marg-IW ~ EM best, Marg-Var approaches, "
                       "Zeroed plateaus.")
        out.append(fig)
    return out
