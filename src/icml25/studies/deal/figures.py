"""Figures through the shared helper: PSNR per method and task, the fixed-point residual against the
outer iteration, and one test image (noisy, TV, DnCNN, DEAL, DEAL's mask)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def figures(agg, cfg, out_dir: Path, ctx=None) -> list:
    from icml25.core import figures as F

    from .study import METHODS, paper_reference

    methods = [m for m in cfg["methods"] if m in METHODS]
    labels = {m: METHODS[m].label for m in methods}
    colors = F.method_colors(methods, "deal")
    sigmas = [float(s) for s in cfg["eval"]["sigmas"]]
    paper_label, paper_psnr, _ = paper_reference(cfg)
    paper_set = "CBSD68" if cfg["data"].get("color") else "BSD68"
    tasks = [(f"denoise/s{s:g}", f"denoising σ={s:g}", paper_psnr.get(int(s))) for s in sigmas]
    if cfg["deblur"].get("enabled", True):
        tasks.append(("deblur", "deblurring (models reused)", None))
    inv = cfg.get("inverse") or {}
    if inv.get("enabled", False):
        tasks += [(t, f"{t.upper()} (models reused)", None) for t in ("ct", "mri") if t in (inv.get("tasks") or {})]
    out = []

    fig, axes = F.panels(len(tasks), name="psnr", title=f"PSNR per method and task ({cfg['scale']} scale)")
    for ax, (setting, title, paper) in zip(axes, tasks):
        F.bars(ax, agg, methods, setting, "psnr", labels=labels, colors=colors, paper_method="deal",
               paper={"deal": paper} if paper else None, paper_label=f"paper ({paper_set})", ylabel="PSNR (dB)", title=title)
        vals = agg[(agg.setting == setting) & (agg.metric == "psnr")]["mean"]
        if len(vals):
            ax.set_ylim(float(vals.min()) - 2, max(float(vals.max()), paper or 0) + 1)
    F.legend(fig, ncols=3)
    F.caption(fig, "PSNR on the test crops (outputs clipped to [0, 1]) per method: denoising at each noise level and "
                   "deblurring, sparse-view CT and undersampled MRI with the denoising-trained models (DEAL: lambda tuned "
                   "on the validation image; DnCNN: plug-and-play HQS; input: blurred / FBP / zero-filled). " + F.SPREAD + f". Stars: the paper's DEAL on {paper_set} (other images at mini, "
                   "full-size model), not comparable in absolute value there.")
    out.append(fig)

    if ctx is not None:
        runs = ctx.per_run("fixed_point.json", methods=[m for m in ("deal", "deal_noattn") if m in methods])
        if runs:
            s = max(sigmas)
            fig, (ax,) = F.panels(1, name="fixed_point_residual",
                                  title=f"Fixed-point residual against the outer iteration (σ={s:g})")
            depth = None
            for m in ("deal", "deal_noattn"):
                rows = [np.asarray(r["residuals"][f"s{s:g}"][0], float) for (mm, _), r in sorted(runs.items()) if mm == m]
                if not rows:
                    continue
                n = min(len(r) for r in rows)
                vals = np.log10(np.maximum(np.stack([r[:n] for r in rows]), 1e-12))
                F.band(ax, np.arange(1, n + 1), vals, label=labels[m], color=colors[m], xlabel="outer iteration k",
                       ylabel="log10 ||x_k+1 - x_k|| / ||x_k||")
                depth = next(iter(runs.values()))["depth"]
            if depth:
                F.reference(ax, depth, label=f"training depth ({depth})", axis="v")
            F.legend(fig, ncols=3)
            F.caption(fig, "Relative change of the iterate per outer iteration of the fixed point (test crops, one batch), "
                           "run to 3x the largest training depth without early stopping. Mean ± 1 std over seeds of "
                           "log10 of the residual; without attention (mask = 1) the fixed point is reached after one "
                           "solve, so the residual drops to the CG tolerance at once.")
            out.append(fig)
        ex = ctx.per_run("example.npz")
        seed0 = min(s for (_, s) in ex) if ex else None
        pick = {m: np.load(p) for (m, s), p in ex.items() if s == seed0}
        if "deal" in pick:
            out.append(_example(F, pick, labels))
    return out


def _show(im):
    """For display: colour (3, h, w) -> (h, w, 3); gray unchanged."""
    return np.moveaxis(im, 0, -1) if im.ndim == 3 else im


def _profile(im, row):
    return (im.mean(0) if im.ndim == 3 else im)[row]


def _example(F, pick, labels):
    deal = pick["deal"]
    from .operators import psnr

    panels = [("clean", deal["clean"], None), ("noisy", deal["noisy"], psnr(deal["noisy"], deal["clean"]))]
    for m in ("tv", "dncnn", "deal"):
        if m in pick:
            panels.append((labels[m].split(" (")[0], pick[m]["out"], psnr(pick[m]["out"], deal["clean"])))
    has_mask = "mask" in deal.files
    n = len(panels) + int(has_mask) + 1
    fig, axes = F.panels(n, ncols=4, name="example", size=(2.6, 2.6),
                         title=f"Test image '{deal['image']}', σ={float(deal['sigma']):g}, seed {0}")
    row = deal["clean"].shape[-2] // 2
    for ax, (name, im, p) in zip(axes, panels):
        ax.imshow(np.clip(_show(im), 0, 1), cmap="gray", vmin=0, vmax=1)
        ax.axhline(row, color="#e08a1e", lw=0.6, label="profiled row")
        ax.set_title(name + ("" if p is None else f" ({p:.2f} dB)"))
        ax.set_xlabel("x (px)")
        ax.set_ylabel("y (px)")
        ax.grid(False)
    i = len(panels)
    if has_mask:
        ax = axes[i]
        im = ax.imshow(deal["mask"], cmap="magma", vmin=0, vmax=1)
        ax.axhline(row, color="#2f6db5", lw=0.6, label="profiled row")
        ax.set_title("DEAL mask (channel mean)")
        ax.set_xlabel("x (px)")
        ax.set_ylabel("y (px)")
        ax.grid(False)
        i += 1
    ax = axes[i]
    for name, im, _ in panels:
        ax.plot(np.clip(_profile(im, row), 0, 1), lw=0.8, label=name)
    if has_mask:
        ax.plot(deal["mask"][row], lw=0.8, ls=":", color="black", label="DEAL mask")
    ax.set_title(f"row {row}")
    ax.set_xlabel("x (px)")
    ax.set_ylabel("intensity / mask")
    F.caption(fig, "One test crop at the largest noise level (seed 0): the clean image, the noisy input, TV, DnCNN and "
                   "DEAL outputs with their PSNR, and DEAL's attention mask at its output (mean over the channels; small "
                   "values = weak regularisation, at edges). Last panel: the intensities along the marked row.")
    return fig
