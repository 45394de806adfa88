"""Figures: one style for every study, mean ± spread over seeds, the paper's number as a reference.

The `figures` stage (`icml25 figures --study S`, Snakemake rule `figures`) aggregates a study's run
files exactly as the table stage does, calls the study's optional `figures` hook and writes
`results/<scale>/figures/<study>/`:

    <name>.png      one file per figure (Agg backend, the style below)
    <name>.rst      its caption text (the report's per-figure caption includes it)
    figures.json    what was drawn: per figure and panel the title, axis labels, the plotted series
                    (one per method) and the reference marks; tests check figures against it

A study without a hook gets an empty figure directory (figures.json lists none); nothing else changes.

Adopting it in a study (a few lines; `ctx` is optional)
------------------------------------------------------
    from icml25.core import figures as F

    def figures(agg, cfg, out_dir, ctx=None):
        methods = cfg["methods"]
        fig, axes = F.panels(len(cfg["settings"]), name="accuracy", title="Test accuracy per setting")
        for ax, s in zip(axes, cfg["settings"]):
            F.bars(ax, agg, methods, setting=s, metric="test_acc", labels=LABELS, paper=PAPER.get(s),
                   ylabel="test accuracy", title=s)
        F.legend(fig)   # one legend below the panels: methods, then the paper's marks
        F.caption(fig, "Bars: mean over seeds; error bars: ± 1 std; dots: seeds; star: the paper.")
        return [fig]

Hook contract: `figures(agg, cfg, out_dir[, ctx]) -> list`. `agg` is the aggregated frame of the table
stage (method, setting, metric, mean, std, n, values), `cfg` the effective config. Items of the list:
a matplotlib Figure (saved as `<fig label>.png`; name it with `panels(name=...)` or `fig.set_label`),
a `(name, Figure)` pair, or a path to a file the hook wrote into `out_dir` itself (kept as is, no
content metadata). A hook that declares a fourth parameter gets a `FigureContext`: per-run files
(`ctx.per_run("selection.json")`), the step curves of every run (`ctx.curves()`), the long metric frame,
the claim verdicts and the run directories.

Plot helpers (all take `labels={method: label}` and draw one labelled series per method, with a
colour that is stable within a study; the reference artists carry gid "reference" and are not series):
    bars(ax, agg, methods, setting, metric, paper=...)          one bar per method, ± std, seed dots
    lines(ax, agg, methods, metric, x={setting: x}, paper=...)  mean line ± std band over a sweep (width, k, ...)
    curves(ax, frame, methods, setting, metric)                 step curves (ctx.curves()), mean ± std band
    reference(ax, y, label=...)                                 the paper's number as a dashed line
    legend(fig)                                                 one legend below the panels
    band(ax, x, values_by_seed, label=..., color=...)           any mean ± std band (seeds in rows)
`paper=` is a number (a dashed line over all methods) or {method: number} (a star on that method).
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# One look for every study.
STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 90,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.3,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
}
PAPER_COLOR = "#c0392b"  # the paper's method
PALETTE = ["#2f6db5", "#3c9a5f", "#e08a1e", "#8e5bb5", "#1aa3b0", "#b5651d", "#d4a017", "#5b6e82", "#7f7f7f"]
REFERENCE = "reference"  # gid of reference artists (the paper's numbers, targets): not series
SPREAD = "mean over seeds; error bars / bands: ± 1 std over seeds (ddof=1); dots: individual seeds"


# ---- style and layout ------------------------------------------------------------------------------

def use_style() -> None:
    plt.rcParams.update(STYLE)


def panels(n: int, ncols: int = 3, name: str | None = None, title: str | None = None,
           size: tuple[float, float] = (3.3, 2.6)):
    """A figure with `n` panels on a grid of `ncols` columns; returns (fig, [ax, ...]) of length n."""
    use_style()
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig, axs = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows + (0.4 if title else 0)),
                            squeeze=False, layout="constrained")
    flat = list(axs.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
        fig.delaxes(ax)
    if name:
        fig.set_label(name)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig, flat[:n]


def legend(fig, ncols: int = 4) -> None:
    """One legend for the whole figure (below the panels): every distinct labelled artist of every
    panel, series first, then the references."""
    seen, handles, labels = set(), [], []
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in seen:
                seen.add(lab)
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(ncols, len(handles)))


def caption(fig, text: str) -> None:
    """Attach the figure's caption, plain text (written to <name>.rst and figures.json, shown in the report)."""
    fig._icml25_caption = text


def method_colors(methods: Iterable[str], paper_method: str | None = None) -> dict[str, str]:
    out, i = {}, 0
    for m in methods:
        if m == paper_method:
            out[m] = PAPER_COLOR
        else:
            out[m] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def _expect(ax, methods: Iterable[str], kind: str) -> None:
    meta = ax.__dict__.setdefault("_icml25", {"kind": kind, "methods": []})
    meta["kind"] = kind
    meta["methods"] += [m for m in methods if m not in meta["methods"]]


def _rows(agg, setting: str, metric: str):
    sel = agg[(agg.setting == setting) & (agg.metric == metric)]
    return {r.method: r for r in sel.itertuples(index=False)}


# ---- plots -------------------------------------------------------------------------------------------

def bars(ax, agg, methods: list[str], setting: str, metric: str, *, labels: Mapping[str, str] | None = None,
         paper: float | Mapping[str, float] | None = None, paper_label: str = "paper",
         paper_method: str | None = None, ylabel: str | None = None, title: str | None = None,
         xlabel: str = "method", colors: Mapping[str, str] | None = None, seeds: bool = True):
    """One bar per method (mean over seeds) with ± std error bars and the seeds as dots.

    Methods without a row for (setting, metric) are skipped (and not counted as plotted series)."""
    labels = dict(labels or {})
    colors = dict(colors or method_colors(methods, paper_method))
    rows = _rows(agg, setting, metric)
    drawn = []
    for i, m in enumerate(methods):
        r = rows.get(m)
        if r is None:
            continue
        ax.bar([i], [r.mean], yerr=[r.std], color=colors[m], label=labels.get(m, m), width=0.7,
               capsize=3, error_kw={"lw": 1, "ecolor": "#333333"})
        if seeds and len(r.values) > 1:
            ax.scatter([i] * len(r.values), r.values, s=8, color="#222222", zorder=3, label="_seeds")
        drawn.append(m)
    ax.set_xticks(range(len(methods)))
    ax.set_xticklabels(methods, rotation=30, ha="right")  # short names; legend(fig) gives the labels
    if isinstance(paper, Mapping):
        for m, v in paper.items():
            if m in methods and v is not None:
                ax.plot([methods.index(m)], [v], marker="*", ms=11, color="black", ls="none",
                        gid=REFERENCE, label=f"{paper_label} [{setting}]: {labels.get(m, m)} {v:.3g}")
    elif paper is not None:
        reference(ax, paper, label=f"{paper_label}: {paper:.3g}")
    _finish(ax, xlabel, ylabel or metric, title or setting)
    _expect(ax, drawn, "bars")
    return drawn


def lines(ax, agg, methods: list[str], metric: str, x: Mapping[str, float], *,
          labels: Mapping[str, str] | None = None, paper: float | Mapping[str, float] | None = None,
          paper_label: str = "paper", paper_method: str | None = None, xlabel: str = "x",
          ylabel: str | None = None, title: str | None = None, logx: bool = False,
          colors: Mapping[str, str] | None = None):
    """Mean over seeds vs a swept quantity (settings mapped to x values), ± std band per method."""
    import numpy as np

    labels = dict(labels or {})
    colors = dict(colors or method_colors(methods, paper_method))
    drawn = []
    for m in methods:
        pts = []
        for setting, xv in x.items():
            sel = agg[(agg.method == m) & (agg.setting == setting) & (agg.metric == metric)]
            if not sel.empty:
                pts.append((float(xv), float(sel["mean"].iloc[0]), float(sel["std"].iloc[0])))
        if not pts:
            continue
        pts.sort()
        xs, mu, sd = (np.array(v) for v in zip(*pts))
        ax.plot(xs, mu, marker="o", ms=3, color=colors[m], label=labels.get(m, m))
        ax.fill_between(xs, mu - sd, mu + sd, color=colors[m], alpha=0.2, lw=0, label="_spread")
        drawn.append(m)
    if isinstance(paper, Mapping):
        for m, v in paper.items():
            if v is not None:
                reference(ax, v, label=f"{paper_label}: {labels.get(m, m)} {v:.3g}", color=colors.get(m, "black"))
    elif paper is not None:
        reference(ax, paper, label=f"{paper_label}: {paper:.3g}")
    if logx:
        ax.set_xscale("log")
    _finish(ax, xlabel, ylabel or metric, title)
    _expect(ax, drawn, "lines")
    return drawn


def curves(ax, frame, methods: list[str], setting: str, metric: str, *, labels: Mapping[str, str] | None = None,
           paper_method: str | None = None, xlabel: str = "step", ylabel: str | None = None,
           title: str | None = None, colors: Mapping[str, str] | None = None):
    """Step curves (a frame with method, seed, setting, metric, step, value: `ctx.curves()`): the mean
    over seeds at each step ± std band. Methods without a curve for (setting, metric) are skipped."""
    labels = dict(labels or {})
    colors = dict(colors or method_colors(methods, paper_method))
    sel = frame[(frame.setting == setting) & (frame.metric == metric)]
    drawn = []
    for m in methods:
        part = sel[sel.method == m]
        if part.empty:
            continue
        g = part.groupby("step")["value"]
        mu, sd = g.mean(), g.std(ddof=1).fillna(0.0)
        ax.plot(mu.index, mu.values, color=colors[m], label=labels.get(m, m), lw=1.2)
        ax.fill_between(mu.index, (mu - sd).values, (mu + sd).values, color=colors[m], alpha=0.2, lw=0,
                        label="_spread")
        drawn.append(m)
    _finish(ax, xlabel, ylabel or metric, title or setting)
    _expect(ax, drawn, "curves")
    return drawn


def band(ax, x, values_by_seed, *, label: str, color: str = PAPER_COLOR, xlabel: str | None = None,
         ylabel: str | None = None, title: str | None = None):
    """Mean ± std band of per-seed arrays (rows = seeds) against x: one series."""
    import numpy as np

    v = np.atleast_2d(np.asarray(values_by_seed, dtype=float))
    mu = v.mean(axis=0)
    sd = v.std(axis=0, ddof=1) if v.shape[0] > 1 else np.zeros_like(mu)
    ax.plot(x, mu, color=color, label=label, lw=1.2)
    ax.fill_between(x, mu - sd, mu + sd, color=color, alpha=0.25, lw=0, label="_spread")
    _finish(ax, xlabel, ylabel, title)
    _expect(ax, [label], "band")


def reference(ax, y: float, *, label: str = "paper", color: str = "black", axis: str = "h") -> None:
    """The paper's number (or any target) as a dashed line; not counted as a series."""
    fn = ax.axhline if axis == "h" else ax.axvline
    fn(y, ls="--", lw=1, color=color, gid=REFERENCE, label=label)


def _finish(ax, xlabel, ylabel, title) -> None:
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)


# ---- what a figure shows -------------------------------------------------------------------------------

def series_labels(ax) -> list[str]:
    """The labelled data series of a panel: bar groups, lines and scatter collections whose label does
    not start with '_', minus reference artists (gid 'reference')."""
    out = []
    for c in ax.containers:
        if not c.get_label().startswith("_"):
            out.append(c.get_label())
    for a in list(ax.lines) + list(ax.collections):
        if a.get_gid() == REFERENCE or a.get_label().startswith("_"):
            continue
        out.append(a.get_label())
    return out


def reference_labels(ax) -> list[str]:
    return [a.get_label() for a in list(ax.lines) + list(ax.collections) if a.get_gid() == REFERENCE]


def describe(fig) -> dict:
    """Metadata of a Figure: per visible panel its title, axis labels, series and references."""
    axes = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        meta = getattr(ax, "_icml25", {})
        axes.append({
            "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            "series": series_labels(ax), "references": reference_labels(ax),
            "kind": meta.get("kind", ""), "methods": list(meta.get("methods", [])),
        })
    sup = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    return {"title": sup, "caption": getattr(fig, "_icml25_caption", ""), "axes": axes}


def problems(meta: dict) -> list[str]:
    """Why a described figure is not publishable: unlabelled axes, panels without data, a series count
    that differs from the methods the helper was asked to draw."""
    out = []
    for i, ax in enumerate(meta["axes"]):
        where = f"panel {i} ({ax['title'] or 'untitled'})"
        if not ax["xlabel"] or not ax["ylabel"]:
            out.append(f"{where}: axis label missing")
        if not ax["series"]:
            out.append(f"{where}: no data series")
        if ax["methods"] and len(ax["series"]) != len(ax["methods"]):
            out.append(f"{where}: {len(ax['series'])} series for {len(ax['methods'])} methods")
    return out


def save(fig, path: Path) -> None:
    """Save atomically as PNG and close the figure."""
    from .io import atomic_path

    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", metadata={"Title": describe(fig)["title"] or path.stem, "Software": "icml25"})
    plt.close(fig)


# ---- the stage -------------------------------------------------------------------------------------------

@dataclass
class FigureContext:
    """What a hook may need beyond the aggregated frame (declare a 4th parameter to receive it)."""

    study: Any
    cfg: dict
    agg: Any
    long: Any
    run_dirs: dict  # (method, seed) -> Path of the run's directory
    claims: list = field(default_factory=list)  # [{id, claim, paper, ours, verdict}] from the table stage
    out_dir: Optional[Path] = None

    def per_run(self, name: str, methods: Iterable[str] | None = None) -> dict:
        """{(method, seed): parsed JSON (or Path for other files)} of one file in each run directory."""
        out = {}
        for (m, s), d in self.run_dirs.items():
            if methods is not None and m not in methods:
                continue
            f = Path(d) / name
            if f.exists():
                out[(m, s)] = json.loads(f.read_text()) if f.suffix == ".json" else f
        return out

    def curves(self):
        """Every run's step curves in one frame: method, seed, setting, metric, step, value."""
        import pandas as pd

        parts = []
        for (m, s), d in self.run_dirs.items():
            f = Path(d) / "curves.parquet"
            if f.exists():
                c = pd.read_parquet(f)
                c.insert(0, "seed", int(s))
                c.insert(0, "method", m)
                parts.append(c)
        cols = ["method", "seed", "setting", "metric", "step", "value"]
        return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def _call_hook(hook, agg, cfg, out_dir: Path, ctx: FigureContext):
    try:
        params = inspect.signature(hook).parameters
    except (TypeError, ValueError):
        params = {}
    takes_ctx = "ctx" in params or len(params) >= 4 or any(
        p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values())
    return hook(agg, cfg, out_dir, ctx) if takes_ctx else hook(agg, cfg, out_dir)


def _rst(text: str) -> str:
    for ch in "\\*_`|":
        text = text.replace(ch, "\\" + ch)
    return text


def render_study(study, cfg: dict, agg, long, run_dirs: dict, claims: list, out_dir: Path) -> list[dict]:
    """Run the study's hook and write <name>.png, <name>.rst and figures.json into `out_dir`.

    The directory is built next to its destination and moved into place, so a killed job leaves no
    half-written figure set. Raises RuntimeError when a figure has unlabelled axes, an empty panel or a
    series count that differs from the methods it was asked to draw."""
    from .io import write_json, write_text

    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        ctx = FigureContext(study, cfg, agg, long, run_dirs, claims, tmp)
        items = _call_hook(study.figures, agg, cfg, tmp, ctx) if study.figures else []
        records, errors = [], []
        for i, item in enumerate(items or []):
            if isinstance(item, tuple):
                name, fig = item
                fig.set_label(name)
                item = fig
            if isinstance(item, (str, os.PathLike)):
                src = Path(item)
                if src.parent.resolve() != tmp.resolve():
                    shutil.copy2(src, tmp / src.name)
                rec = {"name": src.stem, "file": src.name, "kind": "file", "caption": "", "title": "", "axes": []}
            else:
                name = item.get_label() or f"{study.name}_{i}"
                rec = {"name": name, "file": f"{name}.png", "kind": "helper", **describe(item)}
                errors += [f"{name}: {p}" for p in problems(rec)]
                save(item, tmp / rec["file"])
            text = rec["caption"] or f"Figure {rec['name']} of study {study.name}."
            write_text(tmp / f"{rec['name']}.rst", _rst(text) + "\n")
            records.append(rec)
        if errors:
            raise RuntimeError(f"study {study.name}: figures not publishable: " + "; ".join(errors))
        write_json(tmp / "figures.json", {"study": study.name, "scale": cfg["scale"], "spread": SPREAD,
                                         "figures": records})
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp, out_dir)
    finally:
        plt.close("all")
        shutil.rmtree(tmp, ignore_errors=True)
    return records
