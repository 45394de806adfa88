"""Aggregation across seeds, per-study tables, claim checks, the metrics parquet and the summary.

Built from the run files only (never from MLflow), so the tables are reproducible from `results/`.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .core.io import read_json, write_json, write_parquet, write_text
from .core import evidence
from .core.registry import VERDICTS, ClaimResult, Study

LONG_COLUMNS = ["study", "scale", "method", "seed", "setting", "metric", "value"]


def collect(metric_files: list[Path]):
    """Long frame of every final metric of the given runs' metrics.json files."""
    import pandas as pd

    rows = []
    for path in metric_files:
        rec = read_json(path)
        for r in rec["metrics"]:
            rows.append({
                "study": rec["study"], "scale": rec["scale"], "method": rec["method"], "seed": int(rec["seed"]),
                "setting": r["setting"], "metric": r["metric"], "value": float(r["value"]),
            })
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def aggregate(long):
    """mean, sample std (ddof=1; 0 for one seed), n, and the per-seed values with their seeds (aligned,
    so claims can pair methods seed by seed) per (method, setting, metric)."""
    long = long.sort_values("seed", kind="stable")
    keys = ["method", "setting", "metric"]
    g = long.groupby(keys, sort=False)["value"]
    agg = g.agg(mean="mean", std=lambda v: float(v.std(ddof=1)) if len(v) > 1 else 0.0, n="count")
    agg["values"] = g.apply(list)
    agg["seeds"] = long.groupby(keys, sort=False)["seed"].apply(list)
    return agg.reset_index()


def fmt(mean: float, std: float | None = None, digits: int = 3) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if std is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def lookup(agg, method: str, setting: str, metric: str):
    """(mean, std, n) of one cell, or None when the run set has no such row."""
    row = agg[(agg.method == method) & (agg.setting == setting) & (agg.metric == metric)]
    if row.empty:
        return None
    r = row.iloc[0]
    return float(r["mean"]), float(r["std"]), int(r["n"])


def need(agg, method: str, setting: str, metric: str):
    """(mean, std, n) of a cell a claim needs; KeyError when absent, which check_claims reports as n.a."""
    c = lookup(agg, method, setting, metric)
    if c is None:
        raise KeyError(f"{method}/{setting}/{metric}")
    return c


def check_claims(study: Study, agg, cfg: dict) -> list[dict]:
    out = []
    for claim in study.claims:
        try:
            res = claim.check(agg, cfg)
        except KeyError as exc:  # a needed row is absent (method or dataset disabled in config)
            res = ClaimResult("n.a.", f"missing result {exc}")
        n_seeds = res.n_seeds
        if n_seeds is None and res.verdict != "n.a." and len(agg):
            n_seeds = int(agg["n"].max())  # a pooled number over the run set's seeds (no interval)
        out.append({"id": claim.id, "claim": claim.text, "paper": claim.paper, "ours": res.ours,
                    "verdict": res.verdict, "margin": res.margin, "unit": res.unit,
                    "interval": list(res.interval) if res.interval else None, "n_seeds": n_seeds,
                    "interval_kind": evidence.INTERVAL_KIND if res.interval else ""})
    return out


def margin_text(c: dict) -> str:
    """'+0.021 acc [-0.004, +0.046]' for a claim record (interval: paired t 95% over the seeds)."""
    return evidence.fmt_margin(c.get("margin"), c.get("unit", ""), c.get("interval"))


def seeds_text(c: dict) -> str:
    """How many seeds the verdict rests on: paired (with an interval) or pooled into one number."""
    if c.get("n_seeds") is None:
        return "–"
    return f"{c['n_seeds']} paired" if c.get("interval") else f"{c['n_seeds']} pooled"


def verdict_counts(claims: list[dict]) -> dict[str, int]:
    return {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}


def counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)


MARGIN_NOTE = ("margin: signed, in the claim's units, > 0 where the claim holds; [low, high]: paired 95% t "
               "interval of the margin over the seeds it rests on (seeds column). holds / fails: the interval "
               "lies on one side of 0 (or, with no interval, the margin's sign); inconclusive: it covers 0.")


def _md_table(frame) -> str:
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(str(v) for v in row) + " |")
    return "\n".join(lines)


def write_study_table(study: Study, cfg: dict, metric_files: list[Path], out_csv: Path, out_md: Path,
                      out_claims: Path, out_html: Path | None = None, out_caption: Path | None = None) -> None:
    long = collect(metric_files)
    agg = aggregate(long)
    table = study.make_table(agg, cfg)
    claims = check_claims(study, agg, cfg)
    csv = agg.drop(columns=["values"]).copy()
    csv.insert(0, "study", study.name)
    csv.insert(1, "scale", cfg["scale"])
    write_text(out_csv, csv.to_csv(index=False))
    p = study.paper
    stand_in = stand_in_text(study, cfg)
    seeds = sorted(long.seed.unique().tolist())
    md = [
        f"# {study.name}: {p.title}",
        "",
        f"{p.authors}, {p.venue}, arXiv {p.arxiv}; official code: {p.code}.",
        "",
        f"Scale **{cfg['scale']}**{budget_text(cfg)}, seeds {seeds}{seed_counts_note(long)}; cells are mean ± std "
        "over seeds."
        + (f" Stand-ins at this scale: {stand_in}" if stand_in else ""),
        "",
        _md_table(table),
        "",
        "## Claims",
        "",
        f"Verdicts: {counts_text(verdict_counts(claims))}. {MARGIN_NOTE}",
        "",
        _md_table(_claims_frame(claims)),
        "",
    ]
    write_text(out_md, "\n".join(md))
    if out_html is not None:
        write_text(out_html, study_html(study, cfg, seeds, table, claims))
    if out_caption is not None:
        write_text(out_caption, study_caption(study, cfg, seeds, claims))
    write_json(out_claims, {"study": study.name, "scale": cfg["scale"], "title": p.title, "claims": claims})


def seed_counts_note(long) -> str:
    """'' when every method ran the same seeds; else each method's seed count (a scale's method_seeds)."""
    per = long.groupby("method", sort=False)["seed"].apply(lambda v: tuple(sorted(set(v))))
    if per.nunique() <= 1:
        return ""
    counts = ", ".join(f"{m} {len(v)}" for m, v in per.items())
    return f" (seeds per method: {counts}; claims pair methods on the seeds they share)"


def budget_text(cfg: dict) -> str:
    f = cfg.get("budget_factor", 1)
    return f" at {f}x its budget knobs (a budget sweep's derived scale)" if f != 1 else ""


def rst_escape(text: str) -> str:
    for ch in "\\*_`|":
        text = text.replace(ch, "\\" + ch)
    return text


def stand_in_text(study: Study, cfg: dict) -> str:
    """What stands in for the paper's setup: a scale variant's own `stand_in` text, else the scale's."""
    return str(cfg.get("stand_in") or study.stand_ins.get(cfg["scale"], ""))


def study_caption(study: Study, cfg: dict, seeds: list, claims: list[dict]) -> str:
    """The report caption of a study (reStructuredText): paper, stand-ins at this scale, claims, verdicts."""
    p, e = study.paper, rst_escape
    stand_in = stand_in_text(study, cfg) or "the paper's own setup."
    counts = verdict_counts(claims)
    lines = [
        f"**{e(p.title)}** ({e(p.authors)}, {e(p.venue)}, arXiv {e(p.arxiv)}; official code: {e(p.code)}).",
        "",
        f"Scale **{e(cfg['scale'])}**, seeds {e(str(seeds))}; table cells and figure bars are the mean over seeds, "
        "± the sample std over seeds.",
        "",
        f"Stand-ins at this scale: {e(stand_in)}",
        "",
        f"Verdicts (computed by the study's claim checks from the run files): {counts_text(counts)}. "
        + e(MARGIN_NOTE),
        "",
    ]
    for c in claims:
        lines.append(f"- **{e(c['verdict'])}**: {e(c['claim'])}. Paper: {e(c['paper'])}. Ours: {e(c['ours'])}. "
                     f"Margin {e(margin_text(c))}, seeds {e(seeds_text(c))}.")
    return "\n".join(lines) + "\n"


_VERDICT_COLOR = {"holds": "#1e7b34", "fails": "#b3261e", "inconclusive": "#9a6700", "n.a.": "#6b6b6b"}


def study_html(study: Study, cfg: dict, seeds: list, table, claims: list[dict]) -> str:
    """A standalone HTML page of the study's table and claim verdicts (what the report shows)."""
    import html

    p, h = study.paper, html.escape
    stand_in = stand_in_text(study, cfg)
    rows = "".join(
        f"<tr><td>{h(c['claim'])}</td><td>{h(c['paper'])}</td><td>{h(c['ours'])}</td>"
        f"<td class='margin'>{h(margin_text(c))}</td><td>{h(seeds_text(c))}</td>"
        f"<td class='verdict' style='color:{_VERDICT_COLOR.get(c['verdict'], '#000')}'><b>{h(c['verdict'])}</b></td></tr>"
        for c in claims)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{h(study.name)}: {h(p.title)}</title>
<style>
body {{ font-family: sans-serif; font-size: 14px; margin: 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 3px 7px; text-align: left; white-space: nowrap; }}
table.claims td {{ white-space: normal; }}
th {{ background: #f2f2f2; }}
</style></head><body>
<h2 id="study-{h(study.name)}">{h(study.name)}: {h(p.title)}</h2>
<p>{h(p.authors)}, {h(p.venue)}, arXiv {h(p.arxiv)}; official code: {h(p.code)}.</p>
<p>Scale <b>{h(cfg['scale'])}</b>, seeds {h(str(seeds))}; cells are mean ± std over seeds.
{('Stand-ins at this scale: ' + h(stand_in)) if stand_in else ''}</p>
<h3>Results</h3>
{table.to_html(index=False, escape=True, border=0, classes="results", table_id="results-" + study.name)}
<h3>Claims</h3>
<p>{h(MARGIN_NOTE)}</p>
<table class="claims" id="claims-{h(study.name)}"><thead><tr><th>claim</th><th>paper</th><th>ours</th><th>margin [95% CI]</th><th>seeds</th><th>verdict</th></tr></thead>
<tbody>{rows}</tbody></table>
</body></html>
"""


def _claims_frame(claims: list[dict]):
    import pandas as pd

    return pd.DataFrame([{"claim": c["claim"], "paper": c["paper"], "ours": c["ours"],
                          "margin [95% CI]": margin_text(c), "seeds": seeds_text(c), "verdict": c["verdict"]}
                         for c in claims], columns=["claim", "paper", "ours", "margin [95% CI]", "seeds", "verdict"])


def summary_markdown(records: list[dict], scale: str, trends: dict | None = None) -> str:
    """The summary page from the studies' claim records ({study, title, claims}). `trends`
    ({(study, claim id): sentence}, from the budget sweeps present) adds a "with budget" column."""
    import pandas as pd

    rows = []
    for rec in records:
        for c in rec["claims"]:
            rows.append({"study": rec["study"], "paper": rec["title"], "claim": c["claim"],
                         "paper's figure": c["paper"], "ours": c["ours"], "margin [95% CI]": margin_text(c),
                         "seeds": seeds_text(c), "verdict": c["verdict"],
                         "with budget": (trends or {}).get((rec["study"], c.get("id")), "no sweep")})
    columns = ["study", "paper", "claim", "paper's figure", "ours", "margin [95% CI]", "seeds", "verdict"]
    if trends:
        columns.append("with budget")
    frame = pd.DataFrame(rows, columns=columns)
    counts = frame.verdict.value_counts().to_dict() if len(frame) else {}
    md = [
        f"# icml25 summary ({scale} scale)",
        "",
        "One row per claim; verdicts are computed by each study's claim checks from the run files. "
        "Per-study tables: `results/" + scale + "/tables/<study>.md`.",
        "",
        "Verdicts: " + counts_text(counts) + ". " + MARGIN_NOTE
        + (" \"With budget\": what the study's budget sweep (`results/" + scale + "/sweeps/`) does to the "
           "claim, from its smallest to its largest factor." if trends else ""),
        "",
        _md_table(frame),
        "",
    ]
    return "\n".join(md)


def sweep_trends(sweep_dir: Path, studies: list[str]) -> dict:
    """{(study, claim id): the sweep's sentence} for the studies with a sweep record in sweep_dir."""
    out = {}
    for name in studies:
        path = Path(sweep_dir) / f"{name}.json"
        if path.is_file():
            out.update({(name, c["id"]): c["trend"] for c in json.loads(path.read_text())["claims"]})
    return out


def write_summary(claim_files: list[Path], metric_files: list[Path], out_md: Path, out_parquet: Path,
                  scale: str, trends: dict | None = None) -> None:
    write_parquet(out_parquet, collect(metric_files))
    records = [json.loads(Path(path).read_text()) for path in claim_files]
    write_text(out_md, summary_markdown(records, scale, trends))
