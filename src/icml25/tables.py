"""Aggregation across seeds, per-study tables, claim checks, the metrics parquet and the summary.

Built from the run files only (never from MLflow), so the tables are reproducible from `results/`.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from .core.io import read_json, write_json, write_parquet, write_text
from .core import evidence
from .core.registry import FLOOR, VERDICTS, ClaimResult, Study

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


SEEDS_CAP = 10_000  # seeds to decide: the search stops here ("> 10,000")


def at_floor(values_a, values_b, floor: float, tol: float = 0.0) -> bool:
    """True when both arms (per-seed values: a list, or a {seed: value} dict as `evidence.seed_values` gives)
    have values and every one lies within `tol` of `floor` (e.g. chance accuracy, 0 %, the untrained model)."""
    arms = [[float(v) for v in (arm.values() if isinstance(arm, dict) else arm)] for arm in (values_a, values_b)]
    return all(arms) and all(abs(v - float(floor)) <= tol for arm in arms for v in arm)


def floor_verdict(result: ClaimResult, values_a, values_b, floor: float, tol: float = 0.0) -> ClaimResult:
    """A claim check's `result`, relabelled n.a. (floor) when both compared arms sit on `floor` (`at_floor`),
    else `result` itself: a check returns `floor_verdict(ClaimResult.of(...), a, b, floor=0.5, tol=0.01)`.
    The margin and interval stay on the record as the evidence."""
    return mark_floor(result, at_floor(values_a, values_b, floor, tol))


def mark_floor(result: ClaimResult, floored: bool) -> ClaimResult:
    """`result` relabelled n.a. (floor) when `floored` (the check decided its arms sit on a floor), else itself."""
    return dataclasses.replace(result, verdict=FLOOR) if floored else result


def verdict_counts(claims: list[dict]) -> dict[str, int]:
    return {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}


def counts_text(counts: dict[str, int]) -> str:
    """'37 holds, 23 fails, 42 inconclusive, 0 n.a. (floor), 10 n.a.' (ends with its own period)."""
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)


def _sentence(text: str) -> str:
    return text if text.endswith(".") else text + "."


def seeds_to_decide(margin: float, interval, n: int, cap: int = SEEDS_CAP) -> int | None:
    """How many paired seeds the t interval would need to exclude 0 at the observed mean and spread: the
    per-seed sd recovered from the interval, sd = (high - low) / 2 * sqrt(n) / t_{0.975, n-1}, then the
    smallest m >= 2 with t_{0.975, m-1} * sd / sqrt(m) < |margin|. None when no m <= cap does (or margin 0)."""
    import numpy as np
    from scipy import stats

    mean, (low, high), n = abs(float(margin)), interval, int(n)
    if n < 2 or not mean > 0 or math.isnan(low) or math.isnan(high):
        return None
    sd = (float(high) - float(low)) / 2 * math.sqrt(n) / evidence.t_quantile(n - 1)
    start = 2
    while start <= cap:  # the half-width falls with m: search in growing blocks, the first m that passes
        m = np.arange(start, min(int(cap), 10 * start) + 1)
        ok = stats.t.ppf(0.5 + evidence.CONFIDENCE / 2, m - 1) * sd / np.sqrt(m) < mean
        if ok.any():
            return int(m[ok.argmax()])
        start = int(m[-1]) + 1
    return None


def seeds_to_decide_text(c: dict) -> str:
    """The 'seeds to decide' cell of a claim record: a figure for an inconclusive claim with an interval,
    '–' for every other (decided, n.a., or a pooled number without an interval)."""
    n, interval, margin = c.get("n_seeds"), c.get("interval"), c.get("margin")
    if c.get("verdict") != "inconclusive" or not interval or margin is None or not n or n < 2:
        return "–"
    if float(margin) == 0:
        return "never (mean 0)"
    m = seeds_to_decide(margin, interval, n)
    return f"> {SEEDS_CAP:,}" if m is None else f"{m:,}"


MARGIN_NOTE = ("margin: signed, in the claim's units, > 0 where the claim holds; [low, high]: paired 95% t "
               "interval of the margin over the seeds it rests on (seeds column). holds / fails: the interval "
               "lies on one side of 0 (or, with no interval, the margin's sign); inconclusive: it covers 0; "
               "n.a. (floor): both compared arms sit on a floor (chance, 0 %, the untrained model), so the "
               "comparison cannot speak to the claim; n.a.: a result the claim needs is missing.")
SEEDS_NOTE = ("seeds to decide (inconclusive claims only; – elsewhere): how many paired seeds the 95% t interval "
              "would need to exclude 0 if the margin's mean and per-seed spread stayed as observed: with the "
              "interval [low, high] over n seeds, sd = (high - low) / 2 · sqrt(n) / t_{0.975, n-1}, and the figure "
              "is the smallest m ≥ 2 with t_{0.975, m-1} · sd / sqrt(m) < |margin| (searched up to "
              f"{SEEDS_CAP:,}; a margin of exactly 0: never).")


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
        f"Verdicts: {_sentence(counts_text(verdict_counts(claims)))} {MARGIN_NOTE} {SEEDS_NOTE}",
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
        f"Verdicts (computed by the study's claim checks from the run files): {_sentence(counts_text(counts))} "
        + e(MARGIN_NOTE),
        "",
    ]
    for c in claims:
        lines.append(f"- **{e(c['verdict'])}**: {e(c['claim'])}. Paper: {e(c['paper'])}. Ours: {e(c['ours'])}. "
                     f"Margin {e(margin_text(c))}, seeds {e(seeds_text(c))}.")
    return "\n".join(lines) + "\n"


_VERDICT_COLOR = {"holds": "#1e7b34", "fails": "#b3261e", "inconclusive": "#9a6700", FLOOR: "#8a8a8a",
                  "n.a.": "#6b6b6b"}


def study_html(study: Study, cfg: dict, seeds: list, table, claims: list[dict]) -> str:
    """A standalone HTML page of the study's table and claim verdicts (what the report shows)."""
    import html

    p, h = study.paper, html.escape
    stand_in = stand_in_text(study, cfg)
    rows = "".join(
        f"<tr><td>{h(c['claim'])}</td><td>{h(c['paper'])}</td><td>{h(c['ours'])}</td>"
        f"<td class='margin'>{h(margin_text(c))}</td><td>{h(seeds_text(c))}</td>"
        f"<td class='verdict' style='color:{_VERDICT_COLOR.get(c['verdict'], '#000')}'><b>{h(c['verdict'])}</b></td>"
        f"<td>{h(seeds_to_decide_text(c))}</td></tr>"
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
<p>{h(MARGIN_NOTE)} {h(SEEDS_NOTE)}</p>
<table class="claims" id="claims-{h(study.name)}"><thead><tr><th>claim</th><th>paper</th><th>ours</th><th>margin [95% CI]</th><th>seeds</th><th>verdict</th><th>seeds to decide</th></tr></thead>
<tbody>{rows}</tbody></table>
</body></html>
"""


def _claims_frame(claims: list[dict]):
    import pandas as pd

    columns = ["claim", "paper", "ours", "margin [95% CI]", "seeds", "verdict", "seeds to decide"]
    return pd.DataFrame([{"claim": c["claim"], "paper": c["paper"], "ours": c["ours"],
                          "margin [95% CI]": margin_text(c), "seeds": seeds_text(c), "verdict": c["verdict"],
                          "seeds to decide": seeds_to_decide_text(c)}
                         for c in claims], columns=columns)


def derived_cell(c: dict | None) -> str:
    """A claim's cell at a derived budget scale: 'holds: +0.021 acc [+0.004, +0.046], 3 paired'; 'not run' (None)."""
    if c is None:
        return "not run"
    return f"{c['verdict']}: {margin_text(c)}, {seeds_text(c)}"


def derived_comparison(derived: dict, records: list[dict]) -> tuple[list[str], list[dict], list[dict]]:
    """(studies, their claims at the derived scale, the same studies' claims at the base scale) for one derived
    scale's {(study, claim id): claim} beside the base scale's claim records."""
    studies = sorted({s for s, _ in derived})
    same = [c for rec in records if rec["study"] in studies for c in rec["claims"]]
    return studies, list(derived.values()), same


def _derived_sentence(name: str, scale: str, derived: dict, records: list[dict]) -> str:
    """'At mini-x3 (...): <counts> over the N claims of <studies>; the same claims at mini: <counts>.'"""
    studies, at, same = derived_comparison(derived, records)
    factor = name.rsplit("-x", 1)[-1]
    return (f"\"Verdict at {name}\": the claim at the derived scale {name} (`snakemake all --config scale={name}`: "
            f"the study's budget knobs, `scales.{scale}.sweep.knobs`, times {factor}, on the sweep's seeds; "
            f"`reference/{name}/`): {counts_text(verdict_counts(at))} over the "
            f"{len(at)} claims of {', '.join(studies)}; the same claims at {scale}: "
            + _sentence(counts_text(verdict_counts(same))))


def summary_markdown(records: list[dict], scale: str, trends: dict | None = None,
                     derived: dict | None = None) -> str:
    """The summary page from the studies' claim records ({study, title, claims}). `trends`
    ({(study, claim id): sentence}, from the budget sweeps present) adds a "with budget" column; `derived`
    ({derived scale: {(study, claim id): claim record}}, e.g. the mini-x3 references) one "verdict at <scale>"
    column per derived scale, so a reader sees beside each verdict what more compute does to it."""
    import pandas as pd

    derived = {k: v for k, v in (derived or {}).items() if v}
    rows = []
    for rec in records:
        for c in rec["claims"]:
            key = (rec["study"], c.get("id"))
            rows.append({"study": rec["study"], "paper": rec["title"], "claim": c["claim"],
                         "paper's figure": c["paper"], "ours": c["ours"], "margin [95% CI]": margin_text(c),
                         "seeds": seeds_text(c), "verdict": c["verdict"],
                         "seeds to decide": seeds_to_decide_text(c),
                         "with budget": (trends or {}).get(key, "no sweep"),
                         **{f"verdict at {name}": derived_cell(d.get(key)) for name, d in derived.items()}})
    columns = ["study", "paper", "claim", "paper's figure", "ours", "margin [95% CI]", "seeds", "verdict",
               "seeds to decide"]
    if trends:
        columns.append("with budget")
    columns += [f"verdict at {name}" for name in derived]
    frame = pd.DataFrame(rows, columns=columns)
    counts = frame.verdict.value_counts().to_dict() if len(frame) else {}
    md = [
        f"# icml25 summary ({scale} scale)",
        "",
        "One row per claim; verdicts are computed by each study's claim checks from the run files. "
        "Per-study tables: `results/" + scale + "/tables/<study>.md`.",
        "",
        "Verdicts: " + _sentence(counts_text(counts)) + " " + MARGIN_NOTE + " " + SEEDS_NOTE
        + (" \"With budget\": what the study's budget sweep (`results/" + scale + "/sweeps/`) does to the "
           "claim, from its smallest to its largest factor." if trends else "")
        + "".join(" " + _derived_sentence(name, scale, d, records) for name, d in derived.items()),
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
