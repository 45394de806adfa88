"""Figures: SNN accuracy against the timing resolution p (ANN as a line), SOPs against accuracy for TTFS and
rate coding, and the energy ratio per model."""
from __future__ import annotations

from icml25.core import figures as F

from .study import METHODS, PAPER_NUMBERS, _p_label, _p_values, clean, setting

LABELS = {m: v.label for m, v in METHODS.items()}


def figures(agg, cfg, out_dir):
    cfg = clean(cfg)
    pairs = [(ds, m) for ds in cfg["datasets"] for m in cfg["models"]]
    ps = _p_values(cfg)
    finite = [p for p in ps if p is not None]
    exact_x = 2 * max(finite) if finite else 1
    out = []

    # 1. accuracy vs p
    fig, axes = F.panels(len(pairs), name="ttfs_acc_vs_p", title="SNN accuracy against timing resolution p")
    for ax, (ds, model) in zip(axes, pairs):
        x = {setting(ds, model, _p_label(p)): (exact_x if p is None else p) for p in ps}
        F.lines(ax, agg, [m for m in ("ttfs", "naive_ttfs") if m in cfg["methods"]], "acc", x, labels=LABELS,
                paper_method="ttfs", xlabel=f"time levels p per window (exact at p={exact_x})",
                ylabel="test accuracy (%)", title=f"{ds} / {model}", logx=True)
        ann = agg[(agg.method == "ann") & (agg.setting == setting(ds, model)) & (agg.metric == "acc")]
        if not ann.empty:
            F.reference(ax, float(ann["mean"].iloc[0]), label="ANN")
    F.legend(fig)
    F.caption(fig, "Test accuracy of the converted SNNs against the number p of spike-time levels per window "
                   f"(the rightmost point, p={exact_x}, is exact float timing); dashed: the ANN. " + F.SPREAD + ".")
    out.append(fig)

    # 2. SOPs vs accuracy (GELU ViT, where the rate baseline exists)
    vit = [m for m, spec in cfg["models"].items() if spec.get("mlp", "gelu") == "gelu"]
    dss = list(cfg["datasets"])
    if vit and "rate_sta" in cfg["methods"]:
        fig, axes = F.panels(len(dss), name="ttfs_sops_vs_acc", title="SOPs per image against accuracy")
        rates = [m for m in ("rate_sta", "rate_spikezip") if m in cfg["methods"]]
        colors = F.method_colors(["ttfs", *rates], "ttfs")
        series = [("ttfs", [_p_label(p) for p in ps]), ("rate_sta", [f"T{int(t)}" for t in cfg["rate"]["T"]])]
        if "rate_spikezip" in rates:
            series.append(("rate_spikezip", [f"T{int(t)}" for t in cfg["spikezip"]["T"]]))
        for ax, ds in zip(axes, dss):
            for m, keys in series:
                pts = []
                for k in keys:
                    s = setting(ds, vit[0], k)
                    a = agg[(agg.method == m) & (agg.setting == s) & (agg.metric == "acc")]
                    o = agg[(agg.method == m) & (agg.setting == s) & (agg.metric == "sops")]
                    if not a.empty and not o.empty:
                        pts.append((float(o["mean"].iloc[0]), float(a["mean"].iloc[0]), k))
                if pts:
                    pts.sort()
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, color=colors[m],
                            label=LABELS[m])
                    for xv, yv, k in pts:
                        ax.annotate(k, (xv, yv), fontsize=6)
            ax.set_xscale("log")
            ax.set_xlabel("synaptic operations per image (log)")
            ax.set_ylabel("test accuracy (%)")
            ax.set_title(f"{ds} / {vit[0]}")
        F.legend(fig)
        F.caption(fig, "Accuracy against SOPs per image: TTFS over the timing resolutions p, spikingjelly's STA and "
                       "SpikeZIP-TF rate coding over the time steps T (labels); means over seeds.")
        out.append(fig)

    # 3. energy ratio per model (exact timing)
    methods = [m for m in ("ttfs", "naive_ttfs") if m in cfg["methods"]]
    fig, axes = F.panels(len(pairs), name="ttfs_energy_ratio", title="Energy ratio E_SNN / E_ANN (exact timing)")
    for ax, (ds, model) in zip(axes, pairs):
        F.bars(ax, agg, methods, setting(ds, model, "exact"), "energy_ratio", labels=LABELS, paper_method="ttfs",
               paper=PAPER_NUMBERS["energy"]["ViT-S/16"], paper_label="paper ViT-S/16",
               ylabel="E_SNN / E_ANN", title=f"{ds} / {model}")
    F.legend(fig)
    F.caption(fig, "Energy of the SNN relative to the ANN: 0.9 pJ per SOP (+ 4.6 pJ per MAC left in float, naive "
                   "TTFS) over 4.6 pJ per ANN MAC; dashed: the paper's ViT-S/16 on ImageNet (22.3%). " + F.SPREAD + ".")
    out.append(fig)
    return out
