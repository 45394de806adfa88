"""code_review figures: KBI and FAR1 through the filter stages (Table 7's shape), LSR with and without
line numbers (Table 8), KBI against the number of reviewers (Table 4)."""
from __future__ import annotations

STAGES = {"all": 0, "coarse": 1, "topk": 2, "n3|meta": 3, "n3|validator": 4}
PAPER_STAGES = {"kbi": [37.04, 33.33, 25.93, 31.11, 20.00], "far1": [94.36, 92.03, 90.15, 87.81, 75.37]}


def figures(agg, cfg, out_dir):
    from icml25.core import figures as F

    from .study import METHODS, SLICER_METHODS

    pm = cfg["paper_method"]
    slicers = [m for m in cfg["methods"] if m in SLICER_METHODS]
    labels = {m: METHODS[m].label for m in cfg["methods"]}
    colors = F.method_colors(cfg["methods"], pm)
    out = []
    if slicers and not agg[(agg.setting == "n3|validator")].empty:
        fig, axes = F.panels(2, ncols=2, name="filter_stages", title="KBI and FAR1 through the filter stages")
        for ax, metric in zip(axes, ("kbi", "far1")):
            F.lines(ax, agg, slicers, metric, STAGES, labels=labels, colors=colors, xlabel="stage",
                    ylabel=metric.upper() + " (%)", title=metric.upper())
            F.band(ax, list(STAGES.values()), [PAPER_STAGES[metric]], label="paper (LeftFlow, LLaMA3.1-405B)",
                   color="black")
            ax.set_xticks(list(STAGES.values()))
            ax.set_xticklabels(["all", "coarse", "top-k", "+meta (3)", "+validator"], rotation=20)
        F.legend(fig)
        F.caption(fig, "KBI and FAR1 of each slicer's pipeline through the stages: reviewer 1's raw comments, the "
                       "coarse filter (Q1, Q2 > 4), Top-k by severity, the Meta-Reviewer over 3 reviewers (support "
                       ">= 2), the Validator. Mean over sampling seeds ± 1 std; black: the paper's Table 7.")
        out.append(fig)
    if pm in cfg["methods"] and not agg[(agg.method == pm) & (agg.setting == "none|all")].empty:
        fig, axes = F.panels(2, ncols=2, name="line_numbers", title="Line success rate with and without line numbers")
        for ax, (s, t) in zip(axes, (("all", "inline numbers"), ("none|all", "no numbers"))):
            F.bars(ax, agg, [pm], s, "lsr", labels=labels, colors=colors, ylabel="LSR (%)", title=t)
            ax.set_ylim(0, 105)
        F.legend(fig)
        F.caption(fig, "LSR (share of comments on a line of the reviewed snippet) of reviewer 1 on LeftFlow slices "
                       "rendered with inline numbers (` N|`, `+N|`, `-N|`) and without; bars: mean over seeds, "
                       "dots: seeds.")
        out.append(fig)
    ns = {f"n{n}|meta": int(n) for n in cfg["review"]["reviewer_sweep"]}
    if slicers and not agg[agg.setting.isin(list(ns))].empty:
        fig, axes = F.panels(2, ncols=2, name="reviewers", title="KBI against the number of reviewers")
        for ax, stage in zip(axes, ("meta", "validator")):
            x = {f"n{n}|{stage}": int(n) for n in cfg["review"]["reviewer_sweep"]}
            F.lines(ax, agg, slicers, "kbi", x, labels=labels, colors=colors, xlabel="reviewers N",
                    ylabel="KBI (%)", title=f"+{stage}")
        F.band(axes[0], [1, 3], [[26.67, 31.11]], label="paper (+Meta, LeftFlow)", color="black")
        F.band(axes[1], [1, 3], [[11.11, 20.00]], label="paper (+Validator, LeftFlow)", color="grey")
        F.legend(fig)
        F.caption(fig, "KBI after the Meta-Reviewer and after the Validator for N = 1, 3, 5 sampled reviewers "
                       "(mean over seeds ± 1 std); black/grey: the paper's Table 4 (1 -> 3 reviewers).")
        out.append(fig)
    return out
