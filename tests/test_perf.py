"""Performance guards (issue 33), on one small study's smoke run through the real `snakemake` CLI:
a no-op Snakemake call does not stall, `icml25 bench` builds its table from the run's benchmark files,
and the light stages (table, summary, track) never import torch."""
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, copy_workflow, git_init, snakemake
from icml25 import bench as bench_mod

pytestmark = pytest.mark.slow
STUDY = "sparse_drl"  # the cheapest study at smoke scale (11 jobs)
CONFIG = ["--config", "scale=smoke", f"studies=[{STUDY}]"]
# A stall is time the Snakemake process neither runs nor waits for a core; more than this fails.
STALL_LIMIT_S = 3.0
SLURM_TOOLS = ("sinfo", "scontrol", "squeue", "sacct", "sbatch")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A finished smoke run of STUDY (tracking on: the track stage has an MLflow store to write)."""
    root = copy_workflow(tmp_path_factory.mktemp("perf") / "wf")
    git_init(root)
    snakemake(root, "all", *CONFIG, "--cores", "2")
    return root


def timed(cmd: list[str], cwd: Path, env: dict, log: Path) -> dict:
    """Run cmd; wall s, CPU s (getrusage of the child and what it waited for), the child's run-queue
    wait (/proc/<pid>/schedstat, read before it is reaped) and stall = wall - CPU - run-queue wait.

    Subtracting the run-queue wait keeps a busy machine (other jobs on the same cores) from reading as
    a stall: what is left is time spent blocked, e.g. on a subprocess that waits for a dead server."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
        wall = time.monotonic() - t0
        try:
            queued = int(Path(f"/proc/{proc.pid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            queued = 0.0  # no schedstat (not Linux): wall - CPU alone, stricter on a busy machine
        rc = proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rc": rc, "wall": wall, "cpu": cpu, "queued": queued, "stall": wall - cpu - queued}


def _fake_slurm(bin_dir: Path, calls: Path) -> None:
    """SLURM client tools whose controller is down: as measured with Debian's slurm-client 22.05 and
    slurmctld stopped, `scontrol show config` fails after ~9 s (it retries the connection)."""
    bin_dir.mkdir()
    for tool in SLURM_TOOLS:
        f = bin_dir / tool
        f.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\nsleep 9\n'
                     'echo "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)" >&2\n'
                     "exit 1\n")
        f.chmod(0o755)


@pytest.mark.parametrize("machine", ["as-is", "slurm-tools-without-controller"])
def test_noop_dry_run_does_not_stall(tree, tmp_path, machine):
    """`snakemake all -n` on a finished tree: no time blocked beyond a few seconds (issue 33: the SLURM
    executor plugin's `scontrol show config` at plugin load cost ~10 s per call once the SLURM tests'
    teardown had stopped slurmctld). Also on a machine with SLURM tools and no controller: a local
    Snakemake call must not ask SLURM anything."""
    env = dict(os.environ)
    calls = tmp_path / "slurm_calls.log"
    if machine != "as-is":
        if (Path(sys.prefix) / ".cluster").exists():
            pytest.skip("this venv has the cluster plugins by choice (make install-cluster): there Snakemake "
                        "asks SLURM at every start")
        _fake_slurm(tmp_path / "bin", calls)
        env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    exe = str(Path(sys.executable).with_name("snakemake"))
    t = timed([exe, "all", "-n", *CONFIG], tree, env, tmp_path / "dry.log")
    out = (tmp_path / "dry.log").read_text()
    assert t["rc"] == 0 and "Nothing to be done" in out, out[-3000:]
    numbers = ", ".join(f"{k} {v:.2f} s" for k, v in t.items() if k != "rc")
    print(f"\nno-op dry run ({machine}): {numbers}")
    ran = calls.read_text() if calls.exists() else ""
    assert not ran, (f"a local dry run ran SLURM commands ({ran.strip()!r}); is snakemake-executor-plugin-slurm "
                     "installed in this venv? It belongs in <venv>/cluster-plugins (`make install` moves it)")
    assert t["stall"] < STALL_LIMIT_S, f"no-op dry run blocked {t['stall']:.1f} s ({numbers})"


def _expected_jobs(root: Path) -> int:
    from icml25.core import config

    raw = config.load_study(root, STUDY)
    cfg = config.effective(raw, "smoke")
    runs = len(cfg["methods"]) * len(cfg["seeds"])
    # download, preprocess, [fit_base], train + evaluate per run, table, figures, track
    return 2 + int(bool(raw.get("has_base"))) + 2 * runs + 3


def test_bench_table_builds_from_the_runs_benchmark_files(tree):
    proc = subprocess.run([str(Path(sys.executable).with_name("icml25")), "bench", "--scale", "smoke"],
                          cwd=tree, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tree / "results" / "smoke"
    table = pd.read_csv(out / "benchmark.csv")
    assert list(table.study) == [STUDY]  # one row per study
    row = table.iloc[0]
    files = sorted((tree / "benchmarks" / "smoke").rglob("*.tsv"))
    assert (tree / "benchmarks" / "smoke" / "summary.tsv") in files  # the cross-study job, in no row
    assert row.jobs == _expected_jobs(tree) == len(files) - 1
    rule_cols = [f"cpu_s_{r}" for r in ("download", "preprocess", "fit_base", "train", "evaluate", "table",
                                        "figures", "track")]
    assert row.cpu_s > 0 and abs(row.cpu_s - row[rule_cols].sum()) < 0.05
    assert row.exact_jobs == row.jobs  # every CLI stage wrote its getrusage record beside its benchmark file
    assert row.cpu_s_train > 0 and row.cpu_s_evaluate > 0 and row.cpu_s_fit_base == 0
    walls = {f: float(pd.read_csv(f, sep="\t")["s"].iloc[-1]) for f in files}
    bench = tree / "benchmarks" / "smoke"
    head = sum(walls[bench / r / f"{STUDY}.tsv"] for r in ("download", "preprocess", "table"))
    assert head < row.critical_path_s <= row.wall_s_sum + 0.05
    assert row.peak_rss_mb > 10 and 0 < row.startup_cpu_s < 5 and 0 < row.startup_share < 1
    md = (out / "benchmark.md").read_text()
    assert f"| {STUDY} | {int(row.jobs)} |" in md and "start-up share" in md
    assert "**Run span**" in md and max(walls.values()) <= bench_mod.span(bench_mod.read(bench), 2)["span_s"]
    assert (out / "benchmark.png").stat().st_size > 1000
    run = json.loads((out / "benchmark.run.json").read_text())  # the README's pipeline line is written from it
    assert run["jobs"] == len(files) and run["studies"] == 1 and run["critical_path_study"] == STUDY
    assert 0 < run["forked_jobs"] <= run["jobs"] and run["span_s"] >= max(walls.values()) and run["cores"] >= 1


def test_run_span_is_first_start_to_last_end():
    """Jobs A (ends at t=100 after 50 s) and B (ends at 130 after 20 s, so it started at 110): the run spans
    50..130 = 80 s, and their 60 + 20 CPU s on 2 cores fill half of it."""
    jobs = pd.DataFrame({"end": [100.0, 130.0], "wall_s": [50.0, 20.0], "cpu_s": [60.0, 20.0]})
    sp = bench_mod.span(jobs, cores=2)
    assert sp["span_s"] == 80.0 and sp["cpu_s"] == 80.0 and sp["busy"] == 0.5


# argv[1]: comma-separated modules that must not be imported; the rest: the CLI's arguments
_PROBE = """import json, sys
import icml25.cli as cli
rc = cli.main(sys.argv[2:])
heavy = sorted(m for m in sys.argv[1].split(",") if m in sys.modules)
print(json.dumps({"rc": rc, "heavy": heavy}))
"""
TORCH = "torch,transformers,gymnasium,neuralop"
# what an empty job needs none of (each costs ~0.5-3 CPU s per job; a study imports them where used)
HEAVY = TORCH + ",scipy,sklearn,pandas,matplotlib,mlflow"


@pytest.mark.parametrize("stage", [["table", "--study", STUDY], ["summary", "--studies", STUDY],
                                   ["track", "--study", STUDY]], ids=lambda s: s[0])
def test_light_stage_does_not_import_torch(tree, tmp_path, stage):
    # in a copy: rewriting the tree's tables would leave its summary out of date for the dry-run test
    root = tmp_path / "wf"
    shutil.copytree(tree, root, symlinks=True)
    proc = subprocess.run([sys.executable, "-c", _PROBE, TORCH, *stage, "--scale", "smoke"], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res == {"rc": 0, "heavy": []}, f"icml25 {stage[0]} imported {res['heavy']}"


def test_empty_job_of_every_study_does_not_import_torch():
    """`icml25 noop` (arguments, configs, the study's import and validation: what every stage does first)
    stays light for every registered study, so no stage inherits torch or scipy from a study's module."""
    from icml25.core import registry

    for study in registry.available():
        proc = subprocess.run([sys.executable, "-c", _PROBE, HEAVY, "noop", "--study", study, "--scale", "mini",
                               "--root", str(REPO)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"rc": 0, "heavy": []}, study
