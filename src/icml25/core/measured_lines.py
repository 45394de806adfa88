"""The measured lines of each study's page, written from the committed records rather than typed by hand:

    ## Cost              <- reference/<scale>/benchmark.csv (`icml25 bench` of the last all-studies run)
    ## Results at mini   <- reference/<scale>/verify.md     (`icml25 verify` of the last clean-clone run)

and, in the top-level README (`sync_readme`), the line above its studies table: the verdict counts of every claim
in reference/<scale>/*.claims.json (what reference/<scale>/summary.md counts), in that table each study's
"verdicts at <scale>" cell: its own claims' counts and seeds, from its claims.json, its "<scale> cost, last
all-studies run" cell from reference/<scale>/benchmark.csv, and the whole-pipeline line:
the last all-studies run's span, jobs and CPU from reference/<scale>/benchmark.run.json (`icml25 bench`).

Each line ends with a marker naming its source (at the end: a line that starts with an HTML comment is an
HTML block in Markdown, whose links and emphasis would not render); `icml25 docs` rewrites the marked lines (or
adds them under the section's heading), and tests/test_docs.py fails when a page's line differs from what the records give, so
a page's cost and reproduction figures cannot drift from the files they cite.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

COST_MARK = "<!-- measured: benchmark.csv -->"
VERIFY_MARK = "<!-- measured: verify.md -->"
COUNTS_MARK = "<!-- measured: claims.json -->"
PIPELINE_MARK = "<!-- measured: benchmark.run.json -->"
README_TABLE = "| study | paper | status |"  # the README studies table's header row starts so
REL = "../../../../reference"  # from src/icml25/studies/<study>/README.md


def page(root: Path, study: str) -> Path:
    return Path(root) / "src" / "icml25" / "studies" / study / "README.md"


def _bench_rows(root: Path, scale: str) -> dict[str, dict]:
    path = Path(root) / "reference" / scale / "benchmark.csv"
    if not path.exists():
        return {}
    with path.open() as f:
        return {r["study"]: r for r in csv.DictReader(f)}


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells."""
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def _verify_rows(root: Path, scale: str) -> dict[str, list[str]]:
    """verify.md's table: study -> its cells (reference, compared, differ, largest, verdicts, result)."""
    path = Path(root) / "reference" / scale / "verify.md"
    if not path.exists():
        return {}
    rows = {}
    for ln in path.read_text().splitlines():
        cells = _cells(ln)
        if ln.startswith("| ") and len(cells) == 7 and cells[0] not in ("study", "---"):
            rows[cells[0]] = cells[1:]
    return rows


def cost_line(study: str, r: dict, scale: str) -> str:
    f = lambda k: float(r.get(k) or 0.0)
    parts = [f"{rule} {f('cpu_s_' + rule):,.0f}" for rule in ("fit_base", "train", "evaluate") if f("cpu_s_" + rule) > 0]
    rest = f("cpu_s") - sum(f("cpu_s_" + rule) for rule in ("fit_base", "train", "evaluate"))
    return (f"In the last all-studies {scale} run ([reference/{scale}/benchmark.md]({REL}/{scale}/benchmark.md), "
            f"`icml25 bench`): **{f('cpu_s'):,.0f} CPU-s** in {int(f('jobs'))} jobs ({', '.join(parts)}, the rest "
            f"{rest:,.0f}); critical path {f('critical_path_s') / 60:.1f} min; peak RSS {f('peak_rss_mb'):,.0f} MB. {COST_MARK}")


def verify_line(study: str, cells: list[str], scale: str) -> str:
    ref, compared, differ, largest, verdicts, result = cells
    what = (f"**{result}**" + ("" if result == "identical" else
                               f" ({differ} of {compared} numbers differ, largest relative difference {largest}; "
                               f"verdicts that differ: {verdicts})"))
    return (f"`make verify` from a clean clone ([reference/{scale}/verify.md]({REL}/{scale}/verify.md)): "
            f"{what} against the reference from {ref}. {VERIFY_MARK}")


def unverified_line(root: Path, study: str, scale: str) -> str:
    """The verify line of a study that the last verify run did not compare (e.g. re-stamped after it)."""
    stamp = Path(root) / "reference" / scale / f"{study}.stamp.json"
    made = ""
    if stamp.exists():
        st = json.loads(stamp.read_text())
        made = f" (made at {str(st.get('git_commit', '?'))[:10]} on {st.get('machine', {}).get('cpu', '?')})"
    return (f"`make verify` from a clean clone ([reference/{scale}/verify.md]({REL}/{scale}/verify.md)): **not in the "
            f"last verify run**; this study's reference{made} has not been rerun from scratch since. {VERIFY_MARK}")


def expected(root: Path, study: str, scale: str = "mini") -> dict[str, str]:
    """heading -> the line the records give (no cost line where benchmark.csv has no row for the study; a study
    that verify.md does not list gets the line saying so)."""
    out = {}
    rows = _verify_rows(root, scale)
    b, v = _bench_rows(root, scale).get(study), rows.get(study)
    if b:
        out["## Cost"] = cost_line(study, b, scale)
    if v:
        out[f"## Results at {scale}"] = verify_line(study, v, scale)
    elif rows:
        out[f"## Results at {scale}"] = unverified_line(root, study, scale)
    return out


def _replace_marked(lines: list[str], line: str) -> bool:
    """Put `line` in place of the first line that ends with its marker; False where none does."""
    mark = line[line.rindex("<!--"):]
    for i, ln in enumerate(lines):
        if ln.endswith(mark):
            lines[i] = line
            return True
    return False


def _with_line(text: str, heading: str, line: str) -> str:
    lines = text.splitlines()
    if _replace_marked(lines, line):
        return "\n".join(lines) + "\n"
    i = lines.index(heading)  # under the heading, before the section's text
    lines[i + 1:i + 1] = ["", line]
    return "\n".join(lines) + "\n"


def sync(root: Path, studies: list[str], scale: str = "mini", write: bool = True) -> list[str]:
    """Rewrite (or, with write=False, only check) each page's measured lines; returns the pages that differ."""
    stale = []
    for study in studies:
        path = page(root, study)
        text = path.read_text()
        new = text
        for heading, line in expected(root, study, scale).items():
            new = _with_line(new, heading, line)
        if new != text:
            stale.append(str(path.relative_to(root)))
            if write:
                path.write_text(new)
    return stale


def counts_line(root: Path, scale: str = "mini") -> str | None:
    """The README's verdict-count line from reference/<scale>/*.claims.json (None where there are none)."""
    from .. import tables
    from . import reference

    records = reference.claim_records(root, scale)
    if not records:
        return None
    claims = [c for r in records for c in r["claims"]]
    counts = tables.counts_text(tables.verdict_counts(claims))
    more = ""
    for name, derived in reference.derived_claims(root, scale).items():
        studies, at, same = tables.derived_comparison(derived, records)
        seeds = {st: max((int(c.get("n_seeds") or 0) for (s, _), c in derived.items() if s == st), default=0)
                 for st in studies}
        named = ", ".join(f"{st} ({n} seed{'s' if n != 1 else ''})" for st, n in seeds.items())
        more += (f" At {name} (the budget knobs times {name.rsplit('-x', 1)[-1]}, `reference/{name}/`), the "
                 f"{len(at)} claims of {named}: **{tables.counts_text(tables.verdict_counts(at))}**, "
                 f"where at {scale} they are {tables.counts_text(tables.verdict_counts(same))}")
    return (f"Verdicts at {scale}, all {len(claims)} claims of the {len(records)} studies with reference results "
            f"([reference/{scale}/summary.md](reference/{scale}/summary.md), counted from "
            f"`reference/{scale}/*.claims.json`): **{counts}**{more} {COUNTS_MARK}")


def _duration(s: float) -> str:
    h, rest = divmod(int(round(s)), 3600)
    m, sec = divmod(rest, 60)
    return (f"{h} h " if h else "") + f"{m} min {sec} s"


def pipeline_line(root: Path, scale: str = "mini") -> str | None:
    """The README's whole-pipeline line from reference/<scale>/benchmark.run.json (None where there is none)."""
    path = Path(root) / "reference" / scale / "benchmark.run.json"
    if not path.exists():
        return None
    r = json.loads(path.read_text())
    forked = f"; {r['forked_jobs']:,} of the jobs ran in children of the warm fork server" if r.get("forked_jobs") else ""
    commit = f", commit {r['commit']}" if r.get("commit") else ""
    return (f"**The whole {scale} pipeline, all {r['studies']} studies** ({r['jobs']:,} jobs with the summary), in "
            f"the last all-studies run ([reference/{scale}/benchmark.md](reference/{scale}/benchmark.md), {r['date']}, "
            f"{r['machine']}, {r['cores']} cores{commit}): **{_duration(r['span_s'])}** from the first job's start to "
            f"the last one's end; the jobs' {r['cpu_s']:,.0f} CPU-s kept the cores {100 * r['busy']:.0f} % busy"
            f"{forked}; the longest critical path {r['critical_path_s']:.0f} s ({r['critical_path_study']}). "
            f"{PIPELINE_MARK}")


def study_cell(claims: list[dict]) -> str:
    """A study's verdicts for the README table: '2 holds, 1 inconclusive, 1 n.a. (3 seeds)' (zero counts left out;
    the seeds are the most any claim rests on)."""
    from .. import tables

    counts = tables.verdict_counts(claims)
    text = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    seeds = max((int(c.get("n_seeds") or 0) for c in claims), default=0)
    return text + (f" ({seeds} seeds)" if seeds else "")


def cost_cell(r: dict) -> str:
    """A study's cost in the README table, from its benchmark.csv row: '676 CPU-s, critical path 9.2 min'."""
    return f"{float(r['cpu_s']):,.0f} CPU-s, critical path {float(r['critical_path_s']) / 60:.1f} min"


def _table_cells(root: Path, lines: list[str], scale: str) -> None:
    """Write each study row's "verdicts at <scale>" cell (the column so headed) from the study's claims.json, and
    its "<scale> cost, last all-studies run" cell from reference/<scale>/benchmark.csv."""
    heads = [i for i, ln in enumerate(lines) if ln.startswith(README_TABLE)]
    if not heads:
        return
    cols = _cells(lines[heads[0]])
    want, cost = f"verdicts at {scale}", f"{scale} cost, last all-studies run"
    if want not in cols:
        return
    k, c = cols.index(want), cols.index(cost) if cost in cols else None
    bench = _bench_rows(root, scale)
    for i in range(heads[0] + 2, len(lines)):
        if not lines[i].startswith("| "):
            break
        cells = _cells(lines[i])
        study = cells[0].split("`")[1] if cells[0].count("`") >= 2 else cells[0]
        path = Path(root) / "reference" / scale / f"{study}.claims.json"
        if len(cells) != len(cols):
            continue
        if path.exists():
            cells[k] = study_cell(json.loads(path.read_text())["claims"])
        if c is not None and study in bench:
            cells[c] = cost_cell(bench[study])
        lines[i] = "| " + " | ".join(cells) + " |"


def sync_readme(root: Path, scale: str = "mini", write: bool = True) -> list[str]:
    """Rewrite (or only check) the README's verdict-count line (the marked line, else a new one above the studies
    table) and the table's per-study verdict cells. Returns ["README.md"] when it differs, else []."""
    path = Path(root) / "README.md"
    line = counts_line(root, scale)
    if line is None or not path.exists():
        return []
    text = path.read_text()
    lines = text.splitlines()
    if not _replace_marked(lines, line):
        heads = [i for i, ln in enumerate(lines) if ln.startswith(README_TABLE)]
        if not heads:
            return []
        lines[heads[0]:heads[0]] = [line, ""]
    _table_cells(root, lines, scale)
    pipe = pipeline_line(root, scale)
    if pipe is not None:
        _replace_marked(lines, pipe)
    new = "\n".join(lines) + "\n"
    if new == text:
        return []
    if write:
        path.write_text(new)
    return ["README.md"]
