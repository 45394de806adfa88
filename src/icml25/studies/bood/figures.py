"""Figures through the shared helper: FPR95 and AUROC per method and OOD set, steps to the boundary of the
selected against random features, and a grid of decoded BOOD outliers beside ID images of the same class."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    from icml25.core import figures as F

    from .study import METHODS, PAPER_AVG

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "bood")
    sets = ["mean"] + list(cfg["data"]["ood_sets"])
    out = []
    for metric, name, idx in (("fpr95", "FPR95 (%)", 0), ("auroc", "AUROC (%)", 1)):
        fig, axes = F.panels(len(sets), name=metric, title=f"{name} per method and OOD set ({cfg['scale']} scale)")
        for ax, s in zip(axes, sets):
            paper = {m: v[idx] for m, v in PAPER_AVG.items() if m in methods} if s == "mean" else None
            F.bars(ax, agg, methods, s, metric, labels=labels, colors=colors, paper_method="bood", paper=paper,
                   paper_label="paper, CIFAR-100 average", ylabel=name, title="mean over OOD sets" if s == "mean" else s)
        F.legend(fig, ncols=3)
        F.caption(fig, f"{name} of the energy score (MSP: max softmax) with ID = Fashion-MNIST test images at mini "
                       f"scale, per OOD test set and their mean. {F.SPREAD}. Stars: the paper's CIFAR-100 averages "
                       "(other data, models and decoder: not comparable in absolute value).")
        out.append(fig)

    steps_methods = [m for m in methods if m.startswith("bood")]
    if steps_methods and ctx is not None:
        fig, axes = F.panels(2, ncols=2, name="steps_to_boundary",
                             title="Steps to the decision boundary: selected vs random ID features")
        F.bars(axes[0], agg, steps_methods, "synth", "steps_selected", labels=labels, colors=colors,
               paper_method="bood", ylabel="mean steps of the selected features", title="selected features per variant")
        runs = ctx.per_run("outliers.npz", methods=["bood"])
        drawn = False
        for (m, s), p in sorted(runs.items()):
            z = np.load(p)
            steps, sel = z["steps"], z["selected"]
            if len(steps) == 0:
                continue
            ok = steps[steps >= 1]
            bins = np.arange(0.5, max(int(ok.max()), 2) + 1.5)
            centers = 0.5 * (bins[1:] + bins[:-1])
            for vals, col, lab in ((ok, "#5b6e82", "all correctly classified ID"),
                                   (steps[sel], F.PAPER_COLOR, f"selected (fewest steps, r = {cfg['bood']['r']:g})")):
                dens, _ = np.histogram(vals, bins=bins, density=True)
                axes[1].plot(centers, dens, drawstyle="steps-mid", color=col, lw=1.4, label=lab)
            axes[1].set_title(f"BOOD, seed {s}")
            axes[1].set_xlabel("steps k(z) until the prediction changes")
            axes[1].set_ylabel("density")
            drawn = True
            break
        if not drawn:
            fig.delaxes(axes[1])
        F.legend(fig, ncols=3)
        F.caption(fig, "Left: mean number of normalised-gradient steps (step size alpha) each variant's selected features "
                       "needed to change the cosine classifier's prediction; the random-feature ablation selects without "
                       "looking at the steps. Right: the distribution of steps over all correctly classified ID features "
                       "and over the fraction r that BOOD keeps (seed 0). " + F.SPREAD + ".")
        out.append(fig)

    if ctx is not None:
        fig = _grid(F, ctx, cfg)
        if fig is not None:
            out.append(fig)
    return out


def _grid(F, ctx, cfg):
    from . import data as D

    runs = ctx.per_run("outliers.npz", methods=["bood"])
    if not runs:
        return None
    seed0 = min(s for (_, s) in runs)
    z = np.load(runs[("bood", seed0)])
    imgs, src = z["images"], z["src"]
    data_dir = Path(ctx.run_dirs[("bood", seed0)]).parents[4] / "data" / "processed" / cfg["scale"] / "bood"
    x, y = D.load(data_dir, "test") if (data_dir / "test.npz").exists() else (None, None)
    classes = sorted(set(int(c) for c in src))[:10]
    names = D.FASHION_CLASSES if cfg["data"]["source"] == "fashion" else None
    fig, axes = F.panels(len(classes), ncols=5, name="decoded_outliers", size=(2.4, 1.3),
                         title="ID test images (left of the line) and decoded BOOD outliers from that class (right)")
    k = 3
    for ax, c in zip(axes, classes):
        row = []
        if x is not None:
            row += [x[y == c][i, 0] for i in range(min(2, int((y == c).sum())))]
        row += [imgs[src == c][i, 0] for i in range(min(k, int((src == c).sum())))]
        h = imgs.shape[-1]
        ax.imshow(np.concatenate(row, axis=1), cmap="gray", vmin=0, vmax=1)
        n_id = min(2, int((y == c).sum())) if x is not None else 0
        ax.axvline(n_id * h - 0.5, color="#e08a1e", lw=1.2, label="ID | decoded outliers")
        ax.set_title(names[c] if names else f"class {c}")
        ax.set_xlabel("image")
        ax.set_ylabel("px")
        ax.set_xticks([])
        ax.grid(False)
    F.legend(fig)
    F.caption(fig, "Per ID class (seed 0): two real ID test images, then decoded BOOD outliers synthesised from boundary "
                   "features of that class pushed c steps past the decision boundary (diffusion decoder, DDIM, "
                   "classifier-free guidance).")
    return fig
