"""Interrupted runs resume; results are deterministic; provenance reruns exactly what changed."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from conftest import copy_workflow, git_init, snakemake

pytestmark = pytest.mark.slow
TIMING = {"cpu_seconds"}  # measurements, not results: excluded from equality checks


def _table(root: Path, study: str = "sand") -> pd.DataFrame:
    t = pd.read_csv(root / "results" / "smoke" / "tables" / f"{study}.csv")
    return t[~t.metric.isin(TIMING)].sort_values(["method", "setting", "metric"]).reset_index(drop=True)


def _results(run_dir: Path) -> dict:
    rec = json.loads((run_dir / "metrics.json").read_text())
    return {(r["setting"], r["metric"]): r["value"] for r in rec["metrics"] if r["metric"] not in TIMING}


def test_sigkill_mid_run_resumes_to_the_same_tables(tmp_path, smoke_tree):
    from conftest import smoke_tree_workflow

    root = smoke_tree_workflow(tmp_path / "wf")  # the smoke tree's studies, to compare with it
    git_init(root)
    exe = str(Path(sys.executable).with_name("snakemake"))
    t0 = time.time()
    proc = subprocess.Popen([exe, "all", "--config", "scale=smoke", "--cores", "2"], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    victim = None
    deadline = time.time() + 300
    while victim is None and time.time() < deadline and proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            try:
                cmd = " ".join(child.cmdline())
            except psutil.Error:
                continue
            # a training job that has run for a moment (past start-up, mid-training)
            if "icml25 train" in cmd and time.time() - child.create_time() > 1.5:
                victim = child
                break
        if victim is not None:
            # freeze the run, so the chosen job cannot finish between being chosen and being killed;
            # if it finished already, thaw and choose again
            os.killpg(proc.pid, signal.SIGSTOP)
            if not (victim.is_running() and victim.status() != psutil.STATUS_ZOMBIE):
                os.killpg(proc.pid, signal.SIGCONT)
                victim = None
        time.sleep(0.2)
    assert victim is not None, "no training job was caught running"
    victim.kill()                         # SIGKILL a training job mid-run ...
    os.kill(proc.pid, signal.SIGKILL)     # ... and the snakemake process
    os.killpg(proc.pid, signal.SIGKILL)   # and whatever else it had started
    proc.wait()
    interrupted_at = time.time() - t0
    done_before = {p: p.stat().st_mtime_ns for p in (root / "results").rglob("metrics.json")}
    assert not (root / "results" / "smoke" / "summary.md").exists()
    # rerun: unlock the killed run's lock, then the same command completes only what was unfinished
    snakemake(root, "--unlock")
    snakemake(root, "all", "--config", "scale=smoke", "--cores", "2")
    for path, mtime in done_before.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was finished before the kill but redone"
    assert len(list((root / "results").rglob("metrics.json"))) == len(list((smoke_tree / "results").rglob("metrics.json")))
    # every output parses; no temp file was taken for an output
    for f in (root / "results").rglob("*.json"):
        json.loads(f.read_text())
    pd.testing.assert_frame_equal(_table(root), _table(smoke_tree))
    print(f"interrupted after {interrupted_at:.1f} s; total {time.time() - t0:.1f} s")


def test_same_seed_same_metrics_different_seed_differs(tmp_path):
    from icml25 import cli

    root = copy_workflow(tmp_path / "wf")
    base = ["--root", str(root), "--scale", "smoke", "--study", "sand"]
    assert cli.main(["download", *base]) == 0 and cli.main(["preprocess", *base]) == 0
    runs = {}
    for tag, seed in (("a", 0), ("b", 0), ("c", 1)):
        for stage in ("train", "evaluate"):
            assert cli.main([stage, *base, "--method", "sand", "--seed", str(seed)]) == 0
        run_dir = root / "results" / "smoke" / "sand" / "sand" / f"seed{seed}"
        runs[tag] = _results(run_dir)
    assert runs["a"] == runs["b"]  # bitwise-equal floats for the same (config, seed)
    assert runs["a"] != runs["c"]


def _finished_copy(smoke_tree: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(smoke_tree, dest, symlinks=True)  # copy2 keeps mtimes; .snakemake keeps params
    return dest


def _jobs(root: Path) -> list[str]:
    """Output files of the jobs a dry run would execute (one line per job in --dry-run output)."""
    proc = snakemake(root, "all", "--config", "scale=smoke", "-n")
    text = proc.stdout + proc.stderr
    return [l.split("output:", 1)[1].strip() for l in text.splitlines() if l.strip().startswith("output:")]


def test_config_change_reruns_only_affected_jobs_and_new_hash(tmp_path, smoke_tree):
    root = _finished_copy(smoke_tree, tmp_path / "wf")
    assert _jobs(root) == []
    path = root / "config" / "studies" / "sand.yaml"
    # resources say where jobs run, not what they compute: nothing reruns
    path.write_text(path.read_text().replace("  smoke:\n", "  smoke:\n    resources:\n      train: {mem_mb: 1234, threads: 1}\n", 1))
    assert _jobs(root) == []
    path.write_text(path.read_text().replace("      stg_trials: 1\n", "      stg_trials: 1\n      lr: 0.002\n", 1))
    jobs = _jobs(root)
    assert jobs, "a config change must rerun the study's jobs"
    assert not any("data/" in j for j in jobs), f"training hp change must not redo data: {jobs}"
    assert sum("train.json" in j for j in jobs) == 7 and sum("metrics.json" in j for j in jobs) == 7
    assert all("/sand" in j or "summary.md" in j for j in jobs), f"other studies' jobs rerun: {jobs}"
    old = json.loads((root / "results/smoke/sand/sand/seed0/metrics.json").read_text())["config_hash"]
    snakemake(root, "all", "--config", "scale=smoke", "--cores", "2")
    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = c.get_experiment_by_name("smoke/sand")
    runs = c.search_runs([exp.experiment_id])
    assert len(runs) == 7  # re-ingestion replaced the old runs
    new = {r.data.tags["config_hash"] for r in runs}
    assert len(new) == 1 and old not in new
    assert json.loads((root / "results/smoke/sand/sand/seed0/metrics.json").read_text())["config_hash"] in new


def test_code_change_reruns_only_that_study(tmp_path, smoke_tree):
    import shutil

    from conftest import REPO

    root = _finished_copy(smoke_tree, tmp_path / "wf")
    # the workflow root's own sources decide the code hash (a checkout installed editable)
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    src = root / "src" / "icml25" / "studies" / "sand" / "methods.py"
    assert _jobs(root) == []
    src.write_text(src.read_text() + "\n# edited\n")
    jobs = _jobs(root)
    assert sum("train.json" in j for j in jobs) == 7
    assert all("/sand" in j or "summary.md" in j for j in jobs), f"other studies' jobs rerun: {jobs}"
    assert not any("data/" in j for j in jobs), "methods.py is not data code: data stays"
    data_src = root / "src" / "icml25" / "studies" / "sand" / "datasets.py"
    data_src.write_text(data_src.read_text() + "\n# edited\n")
    assert any("data/raw/smoke/sand" in j for j in _jobs(root))
