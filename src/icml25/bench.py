"""`icml25 bench --scale S`: Snakemake's per-job benchmark files -> one row per study.

Every rule declares `benchmark: benchmarks/<scale>/<rule>/<study>[/<method>/seed<seed>].tsv` (the
cross-study summary job: benchmarks/<scale>/summary.tsv). This module reads them and writes
results/<scale>/benchmark.csv|md (per study: job count, CPU s by rule, critical-path wall time, peak
RSS, start-up share) and results/<scale>/benchmark.png (CPU-minutes per study stacked by rule). CPU s
come from the record each CLI stage writes beside its benchmark file (`--cpu-record`, exact: see the
comment at RECORD_SLACK_S) where there is one, else from Snakemake's sampled `cpu_time`.

The start-up share is the CPU an empty job costs (`icml25 noop --study S`: parse arguments, load and
validate the configs, import and validate the study, then exit), measured here in a subprocess, times
the study's job count, over the study's CPU s.
"""
from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

# Per-study rules in DAG order (the stacking order of the figure and the CPU columns).
RULES = ("download", "preprocess", "fit_base", "train", "evaluate", "table", "figures", "track")
# The longest chain of one study: these once each, then the slowest (method, seed) run (train then
# evaluate), then the table.
CHAIN_HEAD = ("download", "preprocess", "fit_base")
RUN_RULES = ("train", "evaluate")
# Snakemake samples a job's processes (every 0.5 s for ~15 s, then every 30 s: snakemake/benchmark.py)
# and keeps the CPU of the last sample, so it misses what a job spends after it (measured on a loaded
# 2-core machine: 3.4 of a train job's 9.1 CPU s, 24 % of a study's). So the rules run each stage with
# `--cpu-record <benchmark>.cpu.json`: the CLI runs the stage in a child and writes its exact CPU
# (getrusage of the reaped child); Snakemake's file still gives wall s, max RSS and I/O.
RECORD_SLACK_S = 300  # a record older than its .tsv by more than the job's wall s + this is stale


def _recorded(tsv: Path, wall_s: float) -> dict:
    """The job's own record beside its benchmark file ({} if absent or left by an earlier run)."""
    rec = tsv.with_name(tsv.stem + ".cpu.json")
    try:
        if rec.stat().st_mtime < tsv.stat().st_mtime - (0 if math.isnan(wall_s) else wall_s) - RECORD_SLACK_S:
            return {}
        got = json.loads(rec.read_text())
        return {"cpu_s": float(got["cpu_s"]), "max_rss_mb": float(got.get("max_rss_mb", math.nan)),
                "forked": bool(got.get("forked", False))}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def read(bench_dir: Path):
    """One row per benchmark file: rule, study (None for the summary job), run ('method/seedN' or
    None), wall_s, cpu_s (the job's own record where there is one, else Snakemake's), cpu_s_sampled
    (Snakemake's), cpu_exact (whether cpu_s is the job's record), max_rss_mb, io_in_mb, io_out_mb, end (the
    file's mtime: Snakemake writes it as the job ends), file."""
    import pandas as pd

    rows = []
    for f in sorted(Path(bench_dir).rglob("*.tsv")):
        parts = f.relative_to(bench_dir).with_suffix("").parts
        if len(parts) == 1:
            rule, study, run = parts[0], None, None
        elif len(parts) == 2:
            rule, study, run = parts[0], parts[1], None
        elif len(parts) == 3:  # fit_base/<study>/seed<N>: one base model per seed
            rule, study, run = parts[0], parts[1], parts[2]
        elif len(parts) == 4:
            rule, study, run = parts[0], parts[1], f"{parts[2]}/{parts[3]}"
        else:
            continue  # not a layout the rules write
        rec = pd.read_csv(f, sep="\t", na_values=["NA", "-"])
        if rec.empty:
            continue
        r = rec.iloc[-1]  # rules use no `repeat:`; a file holds one line
        num = lambda k: float(r[k]) if k in r and not pd.isna(r[k]) else math.nan
        own = _recorded(f, num("s"))
        sampled, exact = num("cpu_time"), own.get("cpu_s", math.nan)
        # a job forked by the warm server is not in the process tree Snakemake samples: its RSS is the record's
        rss = own.get("max_rss_mb", math.nan)
        rows.append({"rule": rule, "study": study, "run": run, "wall_s": num("s"),
                     "cpu_s": sampled if math.isnan(exact) else exact, "cpu_s_sampled": sampled,
                     "cpu_exact": not math.isnan(exact), "max_rss_mb": num("max_rss") if math.isnan(rss) else rss,
                     "io_in_mb": num("io_in"), "io_out_mb": num("io_out"), "end": f.stat().st_mtime,
                     "forked": own.get("forked", False), "file": str(f)})
    cols = ["rule", "study", "run", "wall_s", "cpu_s", "cpu_s_sampled", "cpu_exact", "max_rss_mb", "io_in_mb",
            "io_out_mb", "end", "forked", "file"]
    return pd.DataFrame(rows, columns=cols)


def _cli() -> list[str]:
    """The command jobs run (the `icml25` next to this interpreter or on PATH)."""
    exe = Path(sys.executable).with_name("icml25")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("icml25")
    return [found] if found else [sys.executable, "-m", "icml25.cli"]


def child_cpu(cmd: list[str], repeat: int = 2) -> float:
    """CPU s (user + system) of a command in a child process, the least of `repeat` runs (the least
    is the least disturbed by other load); nan if it fails."""
    best = math.inf
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            return math.nan
        best = min(best, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return best


def startup_cpu(root: Path, scale: str, study: str, repeat: int = 2) -> float:
    """CPU s of an empty job of `study`: what every job pays before its stage does any work (run as the
    rules run a stage, with --cpu-record: its parent process is part of every job's cost)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return child_cpu(_cli() + ["noop", "--root", str(root), "--scale", scale, "--study", study,
                                   "--cpu-record", str(Path(tmp) / "noop.cpu.json")], repeat)


def _sum(g, rule: str) -> float:
    v = g.loc[g.rule == rule, "wall_s"]
    return float(v.sum()) if len(v) else 0.0


def summarise(jobs, startup: dict[str, float]):
    """One row per study from read()'s rows: jobs, cpu_s, cpu_s_<rule>, cpu_s_sampled (Snakemake's own
    total), exact_jobs (jobs whose CPU is their own record), critical_path_s, wall_s_sum, peak_rss_mb,
    startup_cpu_s (one empty job), startup_share (startup_cpu_s * jobs / cpu_s)."""
    import pandas as pd

    out = []
    per_study = jobs[jobs.study.notna()]
    for study, g in per_study.groupby("study", sort=True):
        cpu = float(g.cpu_s.fillna(0).sum())
        by_rule = g.groupby("rule").cpu_s.sum()
        runs = g[g.rule.isin(RUN_RULES) & g.run.notna()].groupby("run").wall_s.sum()
        per_seed = g[(g.rule == "fit_base") & g.run.notna()]
        base = float(per_seed.wall_s.max()) if len(per_seed) else _sum(g, "fit_base")  # per-seed bases run side by side
        critical = (sum(_sum(g, r) for r in CHAIN_HEAD if r != "fit_base") + base
                    + (float(runs.max()) if len(runs) else 0.0) + _sum(g, "table"))
        s = startup.get(study, math.nan)
        out.append({
            "study": study, "jobs": int(len(g)), "cpu_s": round(cpu, 2),
            **{f"cpu_s_{r}": round(float(by_rule.get(r, 0.0)), 2) for r in RULES},
            "cpu_s_sampled": round(float(g.cpu_s_sampled.fillna(0).sum()), 2), "exact_jobs": int(g.cpu_exact.sum()),
            "critical_path_s": round(critical, 2), "wall_s_sum": round(float(g.wall_s.sum()), 2),
            "peak_rss_mb": round(float(g.max_rss_mb.max()), 1),
            "startup_cpu_s": round(s, 3),
            "startup_share": round(s * len(g) / cpu, 4) if cpu > 0 else math.nan,
        })
    cols = (["study", "jobs", "cpu_s"] + [f"cpu_s_{r}" for r in RULES] + ["cpu_s_sampled", "exact_jobs"]
            + ["critical_path_s", "wall_s_sum", "peak_rss_mb", "startup_cpu_s", "startup_share"])
    return pd.DataFrame(out, columns=cols)


def span(jobs, cores: int) -> dict:
    """The run's wall time from its files: first job start (end - wall s) to last job end, and how busy the cores
    were over it (all jobs' CPU / (cores x span)). Meaningful when every job ran in one run (`--forceall`)."""
    start = (jobs.end - jobs.wall_s.fillna(0)).min()
    total = float(jobs.end.max() - start) if len(jobs) else math.nan
    cpu = float(jobs.cpu_s.fillna(0).sum())
    return {"span_s": total, "cpu_s": cpu, "busy": cpu / (cores * total) if total and total > 0 else math.nan}


def markdown(table, jobs, scale: str, torch_cpu: float) -> str:
    from .core.reference import machine

    rules = [r for r in RULES if table[f"cpu_s_{r}"].sum() > 0]
    head = ["study", "jobs", "CPU s"] + [f"{r} CPU s" for r in rules] + [
        "critical path s", "peak RSS MB", "start-up share"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]

    def row(name, r):
        cells = [name, str(int(r["jobs"])), f"{r['cpu_s']:.1f}"] + [f"{r[f'cpu_s_{x}']:.1f}" for x in rules]
        cells += [f"{r['critical_path_s']:.1f}", f"{r['peak_rss_mb']:.0f}",
                  "n.a." if math.isnan(r["startup_share"]) else f"{100 * r['startup_share']:.1f} %"]
        return "| " + " | ".join(cells) + " |"

    for r in table.to_dict("records"):
        lines.append(row(r["study"], r))
    if len(table) > 1:
        tot = {c: table[c].sum() for c in table.columns if c.startswith("cpu_s") or c == "jobs"}
        tot["critical_path_s"] = table.critical_path_s.max()
        tot["peak_rss_mb"] = table.peak_rss_mb.max()
        tot["startup_share"] = (float((table.startup_cpu_s * table.jobs).sum()) / tot["cpu_s"]
                                if tot["cpu_s"] > 0 else math.nan)
        lines.append(row("**all**", tot).replace("| **all** | ", "| **all** (path, RSS: max) | ", 1))
    summ = jobs[jobs.study.isna()]
    notes = [
        f"# Benchmark: {scale} scale",
        "",
        f"From Snakemake's benchmark files under `benchmarks/{scale}/` (one per job, written by the run "
        f"that last ran the job); rebuilt by `icml25 bench --scale {scale}` (`make bench`). "
        f"Machine: {machine()['cpu']}, {os.cpu_count()} cores.",
        "",
        "\n".join(lines),
        "",
        f"- **CPU s**: user + system CPU of each job, by rule in the next columns: the job's own getrusage "
        f"record (`<benchmark>.cpu.json`) for {int(table.exact_jobs.sum())} of {int(table.jobs.sum())} jobs, "
        f"else Snakemake's sampled `cpu_time`. Snakemake's samples alone would give {table.cpu_s_sampled.sum():.1f} s "
        f"in all instead of {table.cpu_s.sum():.1f} s: it samples every 0.5 s for ~15 s, then every 30 s, and "
        "misses what a job spends after its last sample.",
        "- **critical path s**: wall s of download + preprocess + fit_base + the slowest (method, seed) run "
        "(train + evaluate) + table: the study's time with unlimited cores (at the load of the run).",
        "- **peak RSS MB**: the largest max RSS of any of the study's jobs.",
        "- **start-up share**: the CPU of an empty job (`icml25 noop --study S --cpu-record ...`: arguments, "
        "configs, study import, as the rules run it; measured now, least of 2 runs) x jobs / CPU s. Per study: "
        + ", ".join(f"{s} {c:.2f} s" for s, c in zip(table.study, table.startup_cpu_s)) + "."
        + (f" Stages that import torch pay {torch_cpu:.2f} CPU s more (`import torch` alone, measured now)."
           if not math.isnan(torch_cpu) else ""),
    ]
    n_forked = int(jobs.forked.sum())
    if n_forked:
        notes.append(f"- **Fork server**: {n_forked} of {len(jobs)} jobs ran in children of the run's warm interpreter "
                     "(`fork_server`, src/icml25/core/forkserver.py: torch, transformers, scipy, sklearn and pandas "
                     "imported once), so they did not pay the torch import above; the others ran fresh.")
    if len(summ):
        notes.append(f"- Cross-study summary job: {summ.wall_s.sum():.1f} s wall, {summ.cpu_s.sum():.1f} CPU s "
                     "(in no study's row).")
    sp = span(jobs, os.cpu_count() or 1)
    notes.append(f"- **Run span**: {sp['span_s'] / 60:.1f} min from the first job's start to the last job's end "
                 f"(the benchmark files' times; one run's span only when every job ran in it, e.g. `--forceall`); "
                 f"the jobs' {sp['cpu_s']:.0f} CPU s kept the {os.cpu_count()} cores {100 * sp['busy']:.0f} % busy "
                 "over it.")
    return "\n".join(notes) + "\n"


def figure(table, scale: str, out_png: Path) -> None:
    """CPU-minutes per study stacked by rule, and the start-up share, through the shared figure helper."""
    import numpy as np

    from .core import figures as F

    fig, (ax, ax2) = F.panels(2, ncols=2, name="benchmark", title=f"CPU per study ({scale} scale)",
                              size=(max(3.3, 0.55 * len(table) + 1.5), 2.8))
    x = np.arange(len(table))
    bottom = np.zeros(len(table))
    for i, r in enumerate(RULES):
        v = table[f"cpu_s_{r}"].to_numpy(dtype=float) / 60
        if not v.any():
            continue
        ax.bar(x, v, bottom=bottom, width=0.7, label=r, color=F.PALETTE[i % len(F.PALETTE)])
        bottom += v
    ax.set_xticks(x)
    ax.set_xticklabels(table.study, rotation=30, ha="right")
    ax.set_xlabel("study")
    ax.set_ylabel("CPU minutes")
    ax.set_title("CPU by rule")
    # the palette colour after the rules', so that it is not mistaken for one of them
    ax2.bar(x, 100 * table.startup_share.to_numpy(dtype=float), width=0.7,
            color=F.PALETTE[len(RULES) % len(F.PALETTE)], label="start-up share")
    ax2.set_xticks(x)
    ax2.set_xticklabels(table.study, rotation=30, ha="right")
    ax2.set_xlabel("study")
    ax2.set_ylabel("% of the study's CPU")
    ax2.set_title("start-up: empty job x jobs")
    F.legend(fig, ncols=5)
    F.caption(fig, f"CPU minutes per study at {scale} scale from Snakemake's benchmark files, stacked by "
                   "rule; right: the share of that CPU an empty job (CLI, configs, study import) times the "
                   "job count accounts for.")
    bad = F.problems(F.describe(fig))
    if bad:
        raise RuntimeError("benchmark figure: " + "; ".join(bad))
    F.save(fig, out_png)


def write(root: Path, scale: str, out_dir: Path | None = None) -> dict:
    """Read benchmarks/<scale>/, write benchmark.csv|md|png into results/<scale>/ (or out_dir)."""
    from .core.errors import UserError
    from .core.io import atomic_path, write_text

    root = Path(root)
    bench_dir = root / "benchmarks" / scale
    jobs = read(bench_dir) if bench_dir.is_dir() else None
    if jobs is None or jobs.study.notna().sum() == 0:
        raise UserError(f"no benchmark files under {bench_dir}: run the pipeline first "
                        f"(`snakemake all --config scale={scale}`), then `icml25 bench --scale {scale}`")
    studies = sorted(jobs.study.dropna().unique())
    startup = {s: startup_cpu(root, scale, s) for s in studies}
    torch_cpu = child_cpu([sys.executable, "-c", "import torch"], repeat=1)
    table = summarise(jobs, startup)
    out = Path(out_dir) if out_dir else root / "results" / scale
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "benchmark.csv", suffix=".csv") as tmp:
        table.to_csv(tmp, index=False)
    write_text(out / "benchmark.md", markdown(table, jobs, scale, torch_cpu))
    write_text(out / "benchmark.run.json", json.dumps(run_record(root, table, jobs), indent=1) + "\n")
    figure(table, scale, out / "benchmark.png")
    return {"csv": out / "benchmark.csv", "md": out / "benchmark.md", "png": out / "benchmark.png",
            "run": out / "benchmark.run.json", "studies": studies}


def run_record(root: Path, table, jobs) -> dict:
    """The whole run in one record (what the README's pipeline line is written from): its span, jobs, CPU,
    the longest critical path, how many jobs were forked, the machine, the day and the commit."""
    import datetime
    import subprocess

    from .core.reference import machine

    cores = os.cpu_count() or 1
    sp = span(jobs, cores)
    crit = table.sort_values("critical_path_s").iloc[-1]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"studies": int(len(table)), "jobs": int(len(jobs)), "span_s": round(sp["span_s"], 1),
            "cpu_s": round(sp["cpu_s"], 1), "busy": round(sp["busy"], 4), "cores": cores,
            "forked_jobs": int(jobs.forked.sum()),
            "critical_path_s": round(float(crit.critical_path_s), 1), "critical_path_study": str(crit.study),
            "machine": machine()["cpu"],
            "date": datetime.datetime.fromtimestamp(float(jobs.end.max()), datetime.timezone.utc).strftime("%Y-%m-%d"),
            "commit": commit}
