"""mpq figures: target accuracy against BitOPs per search method (the oracle marked), sharpness per method
on proxy and target, search time per method."""
from __future__ import annotations


def _cells(agg, cfg, metric):
    """[(method, setting, label, values)] for every (method, search set) that has `metric`."""
    from .study import METHODS, search_sets

    out = []
    for m in cfg["methods"]:
        for s in search_sets(cfg, m):
            r = agg[(agg.method == m) & (agg.setting == s) & (agg.metric == metric)]
            if not r.empty:
                lab = METHODS[m].label.replace(" (proxy)", "") + ("" if s in ("none", "target") else f" [{s}]")
                out.append((m, s, lab, list(r.iloc[0]["values"])))
    return out


def figures(agg, cfg, out_dir):
    import numpy as np

    from icml25.core import figures as F

    colors = F.method_colors(list(cfg["methods"]), paper_method="asga")
    markers = {"mnist": "o", "subset": "s", "target": "*", "none": "D"}
    out = []

    acc = {(m, s): v for m, s, _, v in _cells(agg, cfg, "target_top1")}
    bop = {(m, s): v for m, s, _, v in _cells(agg, cfg, "bitops_m")}
    if acc:
        fig, (ax,) = F.panels(1, name="accuracy_vs_bitops", title="Target top-1 against BitOPs of the deployed policy",
                              size=(5.5, 3.6))
        for m, s, lab, _ in _cells(agg, cfg, "target_top1"):
            a, b = np.asarray(acc[(m, s)]), np.asarray(bop[(m, s)])
            ax.errorbar(b.mean(), a.mean(), xerr=b.std(ddof=1) if len(b) > 1 else None,
                        yerr=a.std(ddof=1) if len(a) > 1 else None, fmt=markers.get(s, "o"),
                        ms=12 if m == "oracle" else 6, color=colors[m], label=lab, capsize=2)
        budget = agg[(agg.method == "uniform3") & (agg.metric == "bitops_m")]
        if not budget.empty:
            F.reference(ax, float(budget.iloc[0]["mean"]), label="budget (uniform 3-bit)", axis="v")
        ax.set_xlabel("BitOPs (millions)")
        ax.set_ylabel("target top-1 (%)")
        ax.set_title("deployed on Fashion-MNIST" if cfg["target"]["source"] == "fashion_idx" else "deployed on the target")
        F.legend(fig, ncols=3)
        F.caption(fig, "Each point: one search method and search set (circle: MNIST proxy, square: random target "
                       "subset, star: the oracle searched on the target, diamond: uniform), mean over seeds ± 1 std; "
                       "every policy is deployed by the same fine-tune from the target FP model. Dashed: the BitOPs "
                       "budget (uniform w3a3) the searches are matched to (±5%).")
        out.append(fig)

    sp = _cells(agg, cfg, "sharpness_proxy")
    st = _cells(agg, cfg, "sharpness_target")
    if st:
        fig, axes = F.panels(2, ncols=2, name="sharpness", title="Sharpness L(w + rho g/|g|) - L(w), rho = "
                             f"{cfg['eval']['sharpness_rho']}", size=(4.6, 3.2))
        for ax, cells, title in ((axes[0], sp, "searched super-net, on its search set"),
                                 (axes[1], st, "deployed model, on the target")):
            for i, (m, s, lab, v) in enumerate(cells):
                ax.bar(i, np.mean(v), yerr=np.std(v, ddof=1) if len(v) > 1 else None, color=colors[m], label=lab,
                       capsize=2)
                ax.plot([i] * len(v), v, "k.", ms=3)
            ax.set_xticks(range(len(cells)), [c[2] for c in cells], rotation=60, ha="right", fontsize=6)
            ax.set_title(title)
            ax.set_xlabel("method [search set]")
            ax.set_ylabel("sharpness (nats)")
        F.legend(fig, ncols=3)
        F.caption(fig, "Left: sharpness of the super-net at its final policy on its own search images (the landscape "
                       "the search optimised); right: of the deployed, fine-tuned model on target training images. "
                       "Bars: mean over seeds, ± 1 std; dots: seeds. The paper: ASGA reaches flatter minima.")
        out.append(fig)

    t = _cells(agg, cfg, "search_cpu_s")
    if t:
        fig, (ax,) = F.panels(1, name="search_time", title="Search cost per method and search set", size=(5.5, 3.2))
        for i, (m, s, lab, v) in enumerate(t):
            ax.bar(i, np.mean(v), yerr=np.std(v, ddof=1) if len(v) > 1 else None, color=colors[m], label=lab, capsize=2)
        ax.set_xticks(range(len(t)), [c[2] for c in t], rotation=60, ha="right", fontsize=6)
        ax.set_xlabel("method [search set]")
        ax.set_ylabel("search CPU seconds")
        ax.set_title("one search epoch on each search set")
        ax.set_yscale("log")
        F.legend(fig, ncols=3)
        F.caption(fig, "CPU seconds of each search loop (one thread; process time, so less sensitive to machine load "
                       "than wall time), mean over seeds ± 1 std. Every search runs the same number of epochs on its "
                       "search set: the oracle pays for the target's size, SAM and ASGA for their second gradient.")
        out.append(fig)
    return out
