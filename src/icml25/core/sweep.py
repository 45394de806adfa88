"""Budget sweeps: does more budget move a claim? (`snakemake sweep --config scale=mini`)

A study declares per scale its budget knobs and factors (`scales.<scale>.sweep`); each factor f > 1 is a
derived scale `<scale>-x<f>` run through the same DAG and code (own results tree, own MLflow
experiment), factor 1 is the scale itself. This module turns the claims of every factor into
`results/<scale>/sweeps/<study>.md|json` (claim x factor -> verdict, margin [interval]) and a figure of
margin against budget per claim, with one sentence per claim saying whether budget moves it.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import config as icfg
from .io import write_json, write_text


def scales(raw: dict, scale: str) -> list[tuple[int, str]]:
    """[(factor, scale name)] of a study's sweep, factor 1 being the plain scale."""
    spec = icfg.sweep_spec(raw, scale)
    return [(int(f), scale if int(f) == 1 else f"{scale}-x{int(f)}") for f in sorted(set(spec["factors"]))]


def trend(points: list[tuple[int, dict]]) -> str:
    """One sentence on a claim over the sweep, from [(factor, claim record)] sorted by factor."""
    with_margin = [(f, c) for f, c in points if c.get("margin") is not None]
    f0, c0 = points[0]
    v0 = c0["verdict"]
    if len(with_margin) < 2:
        return f"{v0} (no margin to follow over the sweep)"
    (fa, a), (fb, b) = with_margin[0], with_margin[-1]
    unit = f" {a['unit']}" if a.get("unit") else ""
    span = f"margin {a['margin']:+.3g} -> {b['margin']:+.3g}{unit} from {fa}x to {fb}x"
    if v0 == "holds":
        return f"holds ({span})"
    if v0 == "n.a.":
        return "n.a."
    later = [f for f, c in points[1:] if c["verdict"] == "holds"]
    if later:
        return f"{v0} at this budget, holds from {later[0]}x ({span})"
    iv = a.get("interval")
    noise = (iv[1] - iv[0]) / 2 if iv else 0.1 * abs(a["margin"])
    # the largest budget's own verdict where it differs (e.g. one seed: a sign, where 1x had an interval)
    head = v0 if b["verdict"] == v0 else f"{v0} at {f0}x, {b['verdict']} at {fb}x"
    if b["margin"] - a["margin"] > noise:
        return f"{head} at this budget ({span})" if head == v0 else f"{head} ({span})"
    return f"{head} (no trend with budget: {span})"


def write(root: Path, study_name: str, scale: str) -> Path:
    from .. import tables
    from . import figures as F

    root = Path(root)
    raw = icfg.load_study(root, study_name)
    runs = []
    for f, sc in scales(raw, scale):
        path = root / "results" / sc / "tables" / f"{study_name}.claims.json"
        runs.append((f, sc, json.loads(path.read_text())["claims"]))
    spec = icfg.sweep_spec(raw, scale)
    out = root / "results" / scale / "sweeps"
    ids = [c["id"] for c in runs[0][2]]
    rows, records = [], []
    for i, cid in enumerate(ids):
        points = [(f, claims[i]) for f, _, claims in runs]
        cells = {f"{f}x": f"{c['verdict']} ({tables.margin_text(c)})" for f, c in points}
        sentence = trend(points)
        rows.append({"claim": runs[0][2][i]["claim"], **cells, "with budget": sentence})
        records.append({"id": cid, "claim": runs[0][2][i]["claim"], "trend": sentence,
                        "points": [{"factor": f, **c} for f, c in points]})
    import pandas as pd

    md = [f"# Budget sweep of {study_name} ({scale})", "",
          f"Knobs {', '.join(f'`{k}`' for k in spec['knobs'])} multiplied by each factor; seeds "
          f"{spec.get('seeds') or 'as the scale'}; each factor > 1 is the derived scale `{scale}-x<f>` run "
          "through the same DAG. Cells: verdict (margin [paired 95% t interval over seeds]).", "",
          tables._md_table(pd.DataFrame(rows)), ""]
    write_text(out / f"{study_name}.md", "\n".join(md))
    write_json(out / f"{study_name}.json", {"study": study_name, "scale": scale, "knobs": spec["knobs"],
                                             "factors": [f for f, _, _ in runs], "claims": records})
    fig, axes = F.panels(len(ids), ncols=3, name=f"{study_name}_margins",
                         title=f"{study_name}: claim margin against budget ({scale})")
    for ax, rec in zip(axes, records):
        pts = [p for p in rec["points"] if p.get("margin") is not None]
        xs = [p["factor"] for p in pts]
        ax.set_title(rec["id"], fontsize=8)
        if not pts:
            ax.text(0.5, 0.5, "n.a.", ha="center", va="center", transform=ax.transAxes)
            continue
        ax.plot(xs, [p["margin"] for p in pts], marker="o", label="margin")
        for p in pts:
            if p.get("interval"):
                ax.vlines(p["factor"], *p["interval"], color="grey")
        ax.axhline(0.0, color="black", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{x}x" for x in xs])
        ax.set_ylabel(pts[0].get("unit") or "margin", fontsize=8)
    F.caption(fig, "Margin of each claim (> 0: holds) against the budget factor; bars: paired 95% t interval "
                   "over seeds; dashed: 0.")
    F.save(fig, out / f"{study_name}_margins.png")
    return out / f"{study_name}.md"


def write_summary(root: Path, scale: str, studies: list[str]) -> Path:
    """results/<scale>/sweeps/summary.md: per claim, the verdict at 1x and what budget does to it."""
    lines = [f"# Budget sweeps ({scale})", "", "| study | claim | with budget |", "|---|---|---|"]
    for name in studies:
        rec = json.loads((Path(root) / "results" / scale / "sweeps" / f"{name}.json").read_text())
        lines += [f"| {name} | {c['claim']} | {c['trend']} |" for c in rec["claims"]]
    path = Path(root) / "results" / scale / "sweeps" / "summary.md"
    write_text(path, "\n".join(lines) + "\n")
    return path
