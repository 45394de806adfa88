"""GaussMarker's figures via icml25.core.figures: TPR@1%FPR per distortion and method, the fused detector's
ROC under rotation beside each single domain, and the GNR's bit accuracy against the flip rate."""
from __future__ import annotations

from pathlib import Path


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    import numpy as np

    from icml25.core import figures as F

    from . import metrics as M
    from .study import METHODS

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "gaussmarker")
    out = []

    dists = list(cfg["distortions"])
    fig, axes = F.panels(len(dists), ncols=4, name="tpr_per_distortion",
                         title=f"TPR@1%FPR per distortion ({cfg['scale']} scale)")
    for ax, d in zip(axes, dists):
        F.bars(ax, agg, methods, d, "tpr1", labels=labels, colors=colors, ylabel="TPR@1%FPR", title=d)
        ax.set_ylim(0, 1.05)
    F.legend(fig)
    F.caption(fig, f"TPR at FPR < 1% on {cfg['detect']['n_test']} paired clean images, per distortion: bars mean "
                   "over key seeds, error bars ± 1 std, dots: seeds. The paper reports an average of 0.997 over "
                   "its eight distortions at Stable Diffusion scale (secondary source), not drawn: different "
                   "model and distortions.")
    out.append(fig)

    if ctx is not None:
        runs = ctx.per_run("scores.npz")
        rots = [d for d in dists if cfg["distortions"][d]["kind"] == "rotate"]
        if runs and rots:
            fig, axes = F.panels(len(rots), ncols=len(rots), name="roc_rotation",
                                 title="ROC under rotation: fused GaussMarker vs each single domain")
            for ax, d in zip(axes, rots):
                drawn = []
                for m in methods:
                    pos, neg = [], []
                    for (mm, s), path in sorted(runs.items()):
                        if mm != m:
                            continue
                        with np.load(path) as z:
                            if f"{d}|pos" in z.files:
                                pos.append(z[f"{d}|pos"])
                                neg.append(z[f"{d}|neg"])
                    if not pos:
                        continue
                    # pooled over seeds, as one ROC per method (each seed has its own key and threshold scale)
                    fpr, tpr, _ = M.roc(np.concatenate(pos), np.concatenate(neg))
                    ax.plot(fpr, tpr, color=colors[m], label=labels[m], lw=1.3)
                    drawn.append(m)
                ax.plot([0, 1], [0, 1], ls=":", color="grey", gid=F.REFERENCE, label="chance")
                F.reference(ax, 0.01, label="FPR = 1%", color="grey", axis="v")
                ax.set_xscale("symlog", linthresh=0.01)
                ax.set_xlim(0, 1)
                F._finish(ax, "false positive rate", "true positive rate", d)
                F._expect(ax, drawn, "lines")
            F.legend(fig)
            F.caption(fig, "ROC of each detector on the rotated test pairs, scores pooled over key seeds (each seed "
                           "has its own key, GNR and fuser); x axis linear below 1% FPR, log above.")
            out.append(fig)

    gm = [m for m in ("gs_gnr", "gaussmarker") if m in methods]
    if gm:
        m = gm[0]
        flips = sorted({s for s in agg[(agg.method == m) & (agg.metric == "gnr_bit_acc")].setting})
        if flips:
            x = {s: float(s[4:]) for s in flips}
            fig, axes = F.panels(1, ncols=1, name="gnr_flip_rate",
                                 title="GNR: message bit accuracy against the flip rate")
            ax = axes[0]
            rows = agg[(agg.method == m) & (agg.metric.isin(["gnr_bit_acc", "gnr_raw_bit_acc"]))]
            for metric, lab, col in (("gnr_bit_acc", "restored by the GNR", F.PAPER_COLOR),
                                     ("gnr_raw_bit_acc", "before the GNR", F.PALETTE[0])):
                pts = sorted((x[r.setting], r.values) for r in rows[rows.metric == metric].itertuples())
                F.band(ax, [p for p, _ in pts], np.array([v for _, v in pts]).T, label=lab, color=col)
            ctl = agg[(agg.method == m) & (agg.metric == "gnr_random_bits")]
            if not ctl.empty:
                F.reference(ax, float(ctl["mean"].iloc[0]), label=f"random bits through the GNR: "
                            f"{float(ctl['mean'].iloc[0]):.3f} (0.5 wanted)", color="black")
            F.reference(ax, 0.5, label="chance 0.5", color="grey")
            ax.set_ylim(0.4, 1.02)
            F._finish(ax, "flip rate p of Flip_p(Affine(m))", "message bit accuracy", "")
            F.legend(fig, ncols=2)
            F.caption(fig, "Fresh Flip_p(Affine(m)) inputs (rotation U(-180, 180), scale U(1, 1.2), as in training) "
                           "restored by each key seed's GNR and decoded (decrypt + vote): mean ± 1 std over seeds; "
                           "the dashed black line is the negative control, uniform random bits through the GNR.")
            out.append(fig)
    return out
