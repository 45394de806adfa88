"""`icml25 <stage> --study S [--method M --seed N]`: the command every Snakemake rule runs.

Each stage can be run and debugged by hand without Snakemake. Bad input exits with code 2 and one
line on stderr naming the problem and the fix.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .core.errors import UserError

STAGES = ("download", "preprocess", "fit-base", "train", "evaluate", "table", "figures", "track", "summary", "list",
          "reference", "verify", "sweep", "noop", "bench", "docs")


class Ctx:
    """Paths and configs of one invocation."""

    def __init__(self, args):
        from .core import config

        self.root = Path(args.root).resolve()
        self.main = config.load_main(self.root)
        self.scale = args.scale or self.main["scale"]
        config.parse_scale(self.scale)
        self.threads = args.threads or self.main["threads"]
        self.args = args

    def study(self, name: str):
        from .core import config, registry

        study = registry.get_study(name)
        raw = config.load_study(self.root, name)
        scales = [sc or {} for sc in raw["scales"].values()]
        scales += [v for sc in scales for v in (sc.get("variants") or {}).values()]  # a variant may list methods too
        listed = list(raw["methods"]) + [m for sc in scales for m in sc.get("methods", [])]
        unknown = sorted({m for m in listed if m not in study.methods})
        if unknown:
            raise UserError(f"config/studies/{name}.yaml lists unknown method(s) {unknown}; known: {', '.join(study.methods)}")
        cfg = config.effective(raw, self.scale)
        if study.validate:
            study.validate(cfg)
        return study, cfg

    def raw_dir(self, study: str) -> Path:
        return self.root / "data" / "raw" / self.scale / study

    def data_dir(self, study: str) -> Path:
        return self.root / "data" / "processed" / self.scale / study

    def results(self) -> Path:
        return self.root / "results" / self.scale

    def base_dir(self, study: str, seed: int | None = None) -> Path:
        """The shared base model's folder, or seed `seed`'s own where the study trains one per seed."""
        return self.results() / study / "base" / ("" if seed is None else f"seed{seed}")

    def run_dir(self, study: str, method: str, seed: int) -> Path:
        return self.results() / study / method / f"seed{seed}"


def _hint(ctx: Ctx, stage: str, study: str) -> str:
    return f"`icml25 {stage} --study {study} --scale {ctx.scale}` (or the matching snakemake target)"


def cmd_download(ctx: Ctx, a) -> None:
    from .core import manifest

    study, cfg = ctx.study(a.study)
    out = ctx.raw_dir(a.study)
    out.mkdir(parents=True, exist_ok=True)
    study.download(cfg, out)
    manifest.write(out, study=a.study, scale=ctx.scale, stage="download")


def cmd_preprocess(ctx: Ctx, a) -> None:
    from .core import manifest

    study, cfg = ctx.study(a.study)
    raw = ctx.raw_dir(a.study)
    manifest.verify(raw, _hint(ctx, "download", a.study))
    out = ctx.data_dir(a.study)
    out.mkdir(parents=True, exist_ok=True)
    study.preprocess(cfg, raw, out)
    manifest.write(out, study=a.study, scale=ctx.scale, stage="preprocess")


def cmd_fit_base(ctx: Ctx, a) -> None:
    from .core import manifest, runtime

    study, cfg = ctx.study(a.study)
    if study.fit_base is None:
        raise UserError(f"study '{a.study}' has no fit_base stage")
    if (a.seed is not None) != bool(cfg.get("base_per_seed")):
        raise UserError(f"study '{a.study}' at {ctx.scale} trains " + (
            "one base model per seed (base_per_seed): give --seed" if cfg.get("base_per_seed")
            else "one shared base model: drop --seed (or set base_per_seed: true in its config)"))
    if a.seed is not None:
        cfg = per_seed_base(cfg, a.seed)
    data = ctx.data_dir(a.study)
    manifest.verify(data, _hint(ctx, "preprocess", a.study))
    runtime.seed_everything(cfg.get("base_seed", 0))
    out = ctx.base_dir(a.study, a.seed)
    out.mkdir(parents=True, exist_ok=True)
    study.fit_base(cfg, data, out)
    manifest.write(out, study=a.study, scale=ctx.scale, stage="fit_base")


def per_seed_base(cfg: dict, seed: int) -> dict:
    """The config of run seed `seed` in a study with one base model per seed: `base_seed` is that seed, for the
    base model and for every stage that seeds from it, so a claim's seed interval covers the base's randomness."""
    return {**cfg, "base_seed": int(seed)}


def _run_inputs(ctx: Ctx, a):
    from .core import manifest

    study, cfg = ctx.study(a.study)
    study.check_method(a.method)
    if a.seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {a.seed}")
    data = ctx.data_dir(a.study)
    manifest.verify(data, _hint(ctx, "preprocess", a.study))
    base = None
    if study.fit_base is not None:
        per_seed = bool(cfg.get("base_per_seed"))
        if per_seed:
            cfg = per_seed_base(cfg, a.seed)
        base = ctx.base_dir(a.study, a.seed if per_seed else None)
        manifest.verify(base, _hint(ctx, "fit-base", a.study))
    return study, cfg, data, base


def cmd_train(ctx: Ctx, a) -> None:
    import pandas as pd

    from .core import io, numeric_pin, runtime

    study, cfg, data, base = _run_inputs(ctx, a)
    run = ctx.run_dir(a.study, a.method, a.seed)
    run.mkdir(parents=True, exist_ok=True)
    runtime.seed_everything(a.seed)
    wall, cpu = time.time(), time.process_time()
    res = study.train(cfg, a.method, a.seed, data, base, run) or {}
    wall, cpu = time.time() - wall, time.process_time() - cpu
    curves = pd.DataFrame(res.get("curves", []), columns=["setting", "metric", "step", "value"])
    io.write_parquet(run / "curves.parquet", curves)
    io.write_json(run / "train.json", {
        "metrics": res.get("metrics", []),
        "wall_seconds": wall, "cpu_seconds": cpu,
        "threads": ctx.threads,
        # the kernels the job ran, asked of torch / MKL / oneDNN / OpenBLAS themselves (tests/test_numeric_pin.py)
        "kernels": numeric_pin.read_back(),
    })


def cmd_evaluate(ctx: Ctx, a) -> None:
    from .core import config, io, provenance, runtime

    study, cfg, data, base = _run_inputs(ctx, a)
    run = ctx.run_dir(a.study, a.method, a.seed)
    if not (run / "train.json").exists():
        raise UserError(f"missing {run / 'train.json'}: run `icml25 train --study {a.study} --method {a.method} --seed {a.seed}` first")
    runtime.seed_everything(a.seed)
    rows = io.read_json(run / "train.json")["metrics"] + list(study.evaluate(cfg, a.method, a.seed, data, base, run))
    for r in rows:
        if set(r) != {"setting", "metric", "value"} or r["metric"] not in study.metrics:
            raise RuntimeError(f"study {a.study}: metric row {r} does not follow the declared schema {sorted(study.metrics)}")
        r["value"] = float(r["value"])
    io.write_json(run / "metrics.json", {
        "study": a.study, "scale": ctx.scale, "method": a.method, "seed": a.seed,
        "paper_method": study.methods[a.method].is_paper_method,
        "git_commit": provenance.git_commit(ctx.root),
        "config_hash": config.config_hash(cfg),
        "code_hash": provenance.code_hash(a.study, root=ctx.root),
        "data_hash": provenance.data_hash(data),
        "params": config.flatten(cfg),
        "metrics": rows,
    })


def _metric_files(ctx: Ctx, cfg: dict) -> list[Path]:
    from .core import config

    files = [ctx.run_dir(cfg["study"], m, s) / "metrics.json" for m, s in config.runs(cfg)]
    missing = [f for f in files if not f.exists()]
    if missing:
        raise UserError(f"missing run results {missing[0]} (and {len(missing) - 1} more); run the train/evaluate stages first")
    return files


def cmd_table(ctx: Ctx, a) -> None:
    from . import tables

    study, cfg = ctx.study(a.study)
    out = ctx.results() / "tables"
    tables.write_study_table(study, cfg, _metric_files(ctx, cfg), out / f"{a.study}.csv",
                             out / f"{a.study}.md", out / f"{a.study}.claims.json",
                             out_html=out / f"{a.study}.html", out_caption=out / f"{a.study}.caption.rst")


def cmd_figures(ctx: Ctx, a) -> None:
    """results/<scale>/figures/<study>/: the study's figures (none without a hook) + figures.json."""
    from . import tables
    from .core import config, figures, io

    study, cfg = ctx.study(a.study)
    files = _metric_files(ctx, cfg)
    long = tables.collect(files)
    claims_file = ctx.results() / "tables" / f"{a.study}.claims.json"
    claims = io.read_json(claims_file)["claims"] if claims_file.exists() else []
    run_dirs = {(m, s): ctx.run_dir(a.study, m, s) for m, s in config.runs(cfg)}
    out = ctx.results() / "figures" / a.study
    recs = figures.render_study(study, cfg, tables.aggregate(long), long, run_dirs, claims, out)
    print(f"{a.study}: {len(recs)} figure(s) in {out}")


def cmd_track(ctx: Ctx, a) -> None:
    from .core import io, tracking

    study, cfg = ctx.study(a.study)
    files = _metric_files(ctx, cfg)
    uri = a.tracking_uri or ctx.main["tracking_uri"]
    figs = ctx.results() / "figures" / a.study
    # a path to the login, never the secret itself (that would land in argv and the logs)
    creds = a.tracking_credentials or ctx.main.get("tracking_credentials") or None
    runs = tracking.ingest_study(uri, ctx.root, ctx.scale, a.study, [f.parent for f in files],
                                 figures_dir=figs if figs.is_dir() else None, credentials_file=creds)
    io.write_json(ctx.results() / a.study / "mlflow_runs.json",
                  {"tracking_uri": uri, "experiment": f"{ctx.scale}/{a.study}", "runs": runs})


def cmd_summary(ctx: Ctx, a) -> None:
    from . import tables

    studies = a.studies or ctx.main["studies"]
    claim_files, metric_files = [], []
    for name in studies:
        _, cfg = ctx.study(name)
        claim_files.append(ctx.results() / "tables" / f"{name}.claims.json")
        metric_files += _metric_files(ctx, cfg)
    # a budget sweep run before this summary (`snakemake sweep`) adds its sentence per claim
    tables.write_summary(claim_files, metric_files, ctx.results() / "summary.md",
                         ctx.results() / "metrics.parquet", ctx.scale,
                         tables.sweep_trends(ctx.results() / "sweeps", studies))


def _ref_studies(ctx: Ctx, a) -> list[str]:
    from .core import registry

    names = a.studies or ctx.main["studies"]
    for n in names:
        registry.get_study(n)  # unknown study: one clear line
    return names


def cmd_reference(ctx: Ctx, a) -> None:
    """Commit a finished run's tables as reference/<scale>/ (stamped): `make reference STUDY=S`."""
    from .core import reference

    for name in _ref_studies(ctx, a):
        out = reference.write(ctx.root, name, ctx.scale)
        print(f"{name}: reference results in {out.relative_to(ctx.root)}/{name}.*")


def cmd_verify(ctx: Ctx, a) -> None:
    """Compare results/<scale>/tables with reference/<scale>: exit 1 and print what differs."""
    from .core import reference

    diffs, stale, compared = [], [], {}
    for name in _ref_studies(ctx, a):
        why = reference.stale(ctx.root, name, ctx.scale)
        if why:
            stale.append(why)
            compared[name] = None
            continue
        compared[name] = c = reference.comparison(ctx.root, name, ctx.scale)
        d = reference.differences(name, c)
        kernels = reference.kernel_mismatch(ctx.root, name, ctx.scale) if d else None
        diffs += d + ([kernels] if kernels else [])
        print(f"{name}: {'identical to the reference' if not d else f'{len(d)} difference(s)'}")
    for line in stale + diffs:
        print(line)
    print(f"report: {reference.verify_report(ctx.root, compared, ctx.scale).relative_to(ctx.root)}")
    if stale or diffs:
        raise SystemExit(1)


def cmd_docs(ctx: Ctx, a) -> None:
    """Write each study page's measured lines (cost, verify) from reference/<scale>/benchmark.csv and verify.md,
    and the README's verdict counts from reference/<scale>/*.claims.json."""
    from .core import measured_lines

    pages = measured_lines.sync(ctx.root, _ref_studies(ctx, a), ctx.scale, write=not a.check)
    pages += measured_lines.sync_readme(ctx.root, ctx.scale, write=not a.check)
    for p in pages:
        print(f"{p}: {'differs from' if a.check else 'rewritten from'} reference/{ctx.scale}/")
    if a.check and pages:
        raise SystemExit(1)


def cmd_sweep(ctx: Ctx, a) -> None:
    """results/<scale>/sweeps/: claim x budget factor tables and figures, from each factor's tables."""
    from .core import sweep

    names = _ref_studies(ctx, a)
    for name in names:
        print(f"{name}: {sweep.write(ctx.root, name, ctx.scale)}")
    sweep.write_summary(ctx.root, ctx.scale, names)


def cmd_list(ctx: Ctx, a) -> None:
    from .core import registry

    for name in registry.available():
        study, cfg = ctx.study(name)
        print(f"{name}: {study.paper.title}\n  methods: {', '.join(cfg['methods'])}; seeds ({ctx.scale}): {cfg['seeds']}")


def cmd_noop(ctx: Ctx, a) -> None:
    """An empty job: what every stage does before its work (arguments, configs, the study's import and
    validation). `icml25 bench` times it to put the start-up cost beside each study's CPU."""
    ctx.study(a.study)


def cmd_bench(ctx: Ctx, a) -> None:
    """results/<scale>/benchmark.csv|md|png from Snakemake's benchmark files (benchmarks/<scale>/)."""
    from . import bench

    out = bench.write(ctx.root, ctx.scale)
    print(f"benchmark of {len(out['studies'])} studies: {out['md']}")



def _run_recorded(argv: list[str], record: Path) -> int:
    """Run the stage in a child process and, if it succeeds, write its CPU s to `record` as JSON.

    The child is forked by the run's warm server where there is one (core/forkserver.py: no imports of torch
    and the like per job; it reports its own getrusage, `forked: true`), else a fresh interpreter, measured from
    outside (getrusage of the reaped child: the interpreter's start and exit and the
    workers it reaped included; plus this small parent). Snakemake's benchmark only samples a job's
    processes and misses what they spend after the last sample (measured: 3.4 of 9.1 s); a record
    written inside the stage would miss its interpreter's exit (~1 s for a job that imported torch)."""
    import resource
    import signal
    import subprocess

    from .core import io

    rest, skip = [], False
    for tok in argv:
        if skip:
            skip = False
        elif tok == "--cpu-record":
            skip = True
        elif not tok.startswith("--cpu-record="):
            rest.append(tok)
    from .core import forkserver

    forked = forkserver.run(rest)  # a child of the run's warm server, where one may take it
    if forked is None:
        proc = subprocess.Popen([sys.executable, "-m", "icml25.cli", *rest],
                                # in the child: SIGKILL when this recorder dies, so killing a job ends its stage
                                preexec_fn=forkserver.die_with_parent if sys.platform.startswith("linux") else None)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # a cancelled job stops the stage too
            signal.signal(sig, lambda s, _f: proc.send_signal(s))
        rc = proc.wait()
        rc = rc if rc >= 0 else 128 - rc  # killed by signal N: exit 128 + N, as a shell reports it
    else:
        rc, child = forked
    if rc == 0:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        user, system = me.ru_utime + kids.ru_utime, me.ru_stime + kids.ru_stime
        rss = kids.ru_maxrss / 1024
        if forked is not None:  # the forked child's own CPU (it reported its getrusage before exiting)
            user, system, rss = user + child["user_s"], system + child["system_s"], child["max_rss_mb"]
        io.write_json(record, {"cpu_s": user + system, "user_s": user, "system_s": system, "max_rss_mb": rss,
                               "forked": forked is not None})
    return rc


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="icml25", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="stage", required=True)
    for stage in STAGES:
        s = sub.add_parser(stage)
        s.add_argument("--root", default=".", help="repository root (default: current directory)")
        s.add_argument("--scale", choices=None, help="smoke | mini | full (default: config/config.yaml)")
        s.add_argument("--threads", type=int, help="torch/BLAS threads (default: config/config.yaml)")
        s.add_argument("--cpu-record", type=Path, metavar="PATH",
                       help="run the stage in a child process and, after success, write its CPU s (getrusage) "
                            "here as JSON (the rules pass benchmarks/...cpu.json, read by `icml25 bench`)")
        if stage in ("download", "preprocess", "fit-base", "train", "evaluate", "table", "figures", "track", "noop"):
            s.add_argument("--study", required=True)
        if stage in ("train", "evaluate"):
            s.add_argument("--method", required=True)
            s.add_argument("--seed", type=int, required=True)
        if stage == "fit-base":
            s.add_argument("--seed", type=int, help="the run seed whose own base model this is (studies with "
                                                     "base_per_seed: true; default: the one shared base model)")
        if stage == "track":
            s.add_argument("--tracking-uri", help="override tracking_uri from config")
            s.add_argument("--tracking-credentials", metavar="FILE",
                           help="MLflow credentials file of a server with a login (default: tracking_credentials "
                                "from config; MLFLOW_TRACKING_USERNAME/PASSWORD take precedence)")
        if stage in ("summary", "reference", "verify", "sweep", "docs"):
            s.add_argument("--studies", nargs="*", help="default: the studies in config/config.yaml")
        if stage == "docs":
            s.add_argument("--check", action="store_true", help="only list the pages whose lines differ (exit 1)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cpu_record:
        return _run_recorded(sys.argv[1:] if argv is None else list(argv), args.cpu_record)
    try:
        if args.threads is not None and args.threads < 1:
            raise UserError(f"--threads must be >= 1, got {args.threads}")
        ctx = Ctx(args)
        from .core import runtime

        runtime.set_threads(ctx.threads)
        globals()["cmd_" + args.stage.replace("-", "_")](ctx, args)
    except UserError as exc:
        print(f"icml25: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
