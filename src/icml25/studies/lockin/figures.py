"""lockin figures: the threshold (Fig. 1), the diversity of the feedback loop (Sec. 4) and, at full scale,
the WildChat-1M diversity series (Sec. 5)."""
from __future__ import annotations


def figures(agg, cfg, out_dir, ctx=None):
    from icml25.core import figures as F

    from .study import METHODS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods)
    out = []
    rho = {s: float(s.split("=")[1]) for s in agg.setting.unique() if s.startswith("rho2=")}
    part_a = [m for m in methods if not agg[(agg.method == m) & agg.setting.isin(list(rho))].empty]
    if rho and part_a:
        fig, axes = F.panels(2, ncols=2, name="lockin_threshold", title="Lock-in iff ρ(W) > 1")
        F.lines(axes[0], agg, part_a, "err_T", rho, labels=labels, colors=colors, xlabel="ρ² = (N−1)λ1λ2",
                ylabel="|ν_T − μ| of the LLM", title="final error")
        F.reference(axes[0], 1.0, label="threshold ρ = 1", axis="v")
        F.lines(axes[1], agg, part_a, "err_slope", rho, labels=labels, colors=colors, xlabel="ρ² = (N−1)λ1λ2",
                ylabel="slope of log error vs log T", title="convergence rate")
        F.reference(axes[1], -0.5, label="1/√T")
        F.legend(fig)
        F.caption(fig, "The formal model (Sec. 3): the LLM's final error and its convergence slope against the "
                       "spectral radius; mean over seeds ± 1 std. Below ρ = 1 the error falls like 1/√T; above, "
                       "beliefs freeze at false values. Plain DeGroot averaging (control) shows no threshold.")
        out.append(fig)
    part_b = [m for m in methods if not agg[(agg.method == m) & (agg.metric == "entropy_ratio")].empty]
    if part_b:
        fig, axes = F.panels(2, ncols=2, name="lockin_diversity", title="Diversity in the human-AI loop")
        F.bars(axes[0], agg, part_b, "mean", "entropy_ratio", labels=labels, colors=colors,
               ylabel="belief entropy end / start", title="belief entropy (mean of topics)")
        F.bars(axes[1], agg, part_b, "mean", "lineage_end", labels=labels, colors=colors,
               ylabel="lineage diversity at the end", title="lineage diversity (mean of topics)")
        F.legend(fig)
        F.caption(fig, "The agent-based loop (Sec. 4 stand-in with an in-pipeline GPT-2): diversity after the "
                       "last round relative to the start; bars are the mean over seeds, error bars ± 1 std, dots "
                       "the seeds. The paper: diversity collapses only when the AI re-absorbs the users' beliefs "
                       "and users trust it.")
        out.append(fig)
    if ctx is not None and "wildchat" in methods:
        cur = ctx.curves()
        cur = cur[(cur.method == "wildchat") & (cur.metric == "lineage")]
        fams = sorted(cur.setting.unique())
        if fams:
            fig, axes = F.panels(len(fams), ncols=min(3, len(fams)), name="lockin_wildchat",
                                 title="WildChat-1M: lineage diversity of users' concepts")
            for ax, fam in zip(axes, fams):
                F.curves(ax, cur, ["wildchat"], fam, "lineage", labels=labels, colors=colors,
                         xlabel="3-day bin since the start", ylabel="lineage diversity", title=fam)
            F.legend(fig)
            F.caption(fig, "Section 5: per-bin lineage diversity of the concepts in users' messages, per model "
                           "family; the line is seed 0 and the bootstrap replicates (seeds > 0) averaged, the band "
                           "± 1 std. Version switches (where a new GPT version becomes the majority) are in the "
                           "table with their discontinuity fits.")
            out.append(fig)
    return out
