"""The smoke DAG on a real single-node SLURM cluster on localhost (slurmctld + slurmd + munge).

scripts/cluster/setup_local_slurm.sh installs (apt) and starts it, idempotently; the fixture stops what
it started and cancels any job left in the queue. Checked: the jobs really went through SLURM (its
job-completion log, JobCompType=jobcomp/filetxt), and the tables equal those of a local run with the
same seeds (timing columns excepted). Once more through profiles/cluster-generic (plain sbatch).

Studies: those of the shared local smoke tree (conftest.SMOKE_TREE_STUDIES), or ICML25_CLUSTER_STUDIES=a,b.
"""
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO, cluster_env, copy_workflow, git_init, snakemake

pytestmark = pytest.mark.slow
SCRIPTS = REPO / "scripts" / "cluster"
# Poll SLURM every few seconds (the profile's defaults suit a real cluster, not a 2-minute test).
FAST = ["--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2",
        "--latency-wait", "5", "--retries", "0", "--keep-going"]
TIMING = re.compile(r"(?:^|_)(?:cpu|wall)_?seconds$|_time$|^time_")


def _run(*cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _our_jobs() -> list[str]:
    out = _run("squeue", "-h", "-o", "%i %j").stdout.split("\n")
    return [l.split()[0] for l in out if l.strip() and l.split()[1].startswith("icml25")]


@pytest.fixture(scope="module")
def slurm():
    """A running single-node SLURM; yields its job-completion log path."""
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (installs slurm-wlm/munge, starts daemons)")
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        pytest.skip("slurm-wlm is not installed and apt-get is unavailable to install it")
    cluster_env()  # skips without the cluster plugins (not in the default venv: scripts/cluster/plugins.py)
    was_up = shutil.which("scontrol") and _run("scontrol", "ping").returncode == 0
    proc = _run(SCRIPTS / "setup_local_slurm.sh", timeout=600)
    if proc.returncode == 2:
        pytest.skip(f"cannot install/start SLURM here: {proc.stderr.strip()}")
    if proc.returncode == 3:
        pytest.skip(f"a SLURM configured by someone else is present; not touching it: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    conf = _run("scontrol", "show", "config").stdout
    jobcomp = Path(re.search(r"^JobCompLoc\s*=\s*(\S+)", conf, re.M).group(1))
    try:
        yield jobcomp
    finally:
        left = _our_jobs()
        if left:  # a killed/timed-out Snakemake leaves its jobs queued
            _run("scancel", *left)
        if not was_up:
            _run(SCRIPTS / "teardown_local_slurm.sh", timeout=120)


def smoke_studies() -> list[str]:
    if os.environ.get("ICML25_CLUSTER_STUDIES"):
        return os.environ["ICML25_CLUSTER_STUDIES"].split(",")
    from conftest import SMOKE_TREE_STUDIES

    return list(SMOKE_TREE_STUDIES)  # the studies of the local smoke tree the SLURM tables are compared with


def _config(studies) -> list[str]:
    return ["--config", "scale=smoke", f"studies=[{','.join(studies)}]"]


def _jobcomp(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [dict(kv.split("=", 1) for kv in line.split() if "=" in kv) for line in path.read_text().splitlines()]


def _comparable(csv: Path) -> pd.DataFrame:
    df = pd.read_csv(csv)
    df = df[~df["metric"].astype(str).str.contains(TIMING)]
    return df.sort_values(list(df.columns[:5])).reset_index(drop=True)


@pytest.fixture(scope="module")
def local_reference(request, tmp_path_factory):
    """The same studies, same seeds, run locally (the default profile): the suite's shared smoke run
    (conftest.smoke_tree, which test_workflow.py needs anyway) unless ICML25_CLUSTER_STUDIES is set."""
    if not os.environ.get("ICML25_CLUSTER_STUDIES"):
        return request.getfixturevalue("smoke_tree")
    root = copy_workflow(tmp_path_factory.mktemp("local") / "wf")
    git_init(root)
    snakemake(root, "all", *_config(smoke_studies()), "--cores", "2")
    return root


@pytest.fixture(scope="module")
def slurm_run(slurm, tmp_path_factory):
    studies = smoke_studies()
    root = copy_workflow(tmp_path_factory.mktemp("slurm") / "wf")
    git_init(root)
    t0 = time.time()
    proc = snakemake(root, "all", "--profile", "profiles/slurm", *_config(studies), *FAST, timeout=1500,
                     env=cluster_env())
    wall = time.time() - t0
    log = proc.stdout + proc.stderr
    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", log)
    info = {"studies": studies, "wall_seconds": round(wall, 1), "slurm_jobs_submitted": len(submitted)}
    print(f"\nSLURM smoke run: {json.dumps(info)}")
    (root / "slurm_smoke.json").write_text(json.dumps(info))
    return {"root": root, "log": log, "run_id": run_id, "submitted": submitted, "wall": wall,
            "jobcomp": slurm, "studies": studies}


def test_smoke_dag_runs_through_slurm(slurm_run):
    rec = [r for r in _jobcomp(slurm_run["jobcomp"]) if r.get("Name") == slurm_run["run_id"]]
    by_id = {r["JobId"]: r for r in rec}
    submitted = slurm_run["submitted"]
    # download+preprocess (one group job per study) and train+evaluate (one per method/seed)
    assert len(submitted) >= 1 + len(slurm_run["studies"]), submitted
    assert sorted(by_id) == sorted(submitted), f"SLURM recorded {sorted(by_id)}, Snakemake submitted {submitted}"
    assert all(r["JobState"] == "COMPLETED" and r["ExitCode"] == "0:0" for r in rec), rec
    assert all("mem=" in r["Tres"] and "cpu=1" in r["Tres"] for r in rec), rec  # DefMemPerCPU / --mem honoured
    for s in slurm_run["studies"]:
        assert (slurm_run["root"] / "results" / "smoke" / "tables" / f"{s}.csv").exists()
    assert (slurm_run["root"] / "results" / "smoke" / "summary.md").exists()
    assert not _our_jobs(), "jobs left in the queue after Snakemake finished"


def test_slurm_tables_equal_local_tables(slurm_run, local_reference):
    for s in slurm_run["studies"]:
        ours = _comparable(slurm_run["root"] / "results" / "smoke" / "tables" / f"{s}.csv")
        ref = _comparable(local_reference / "results" / "smoke" / "tables" / f"{s}.csv")
        pd.testing.assert_frame_equal(ours, ref, check_exact=True)
        claims = lambda r: json.loads((r / "results" / "smoke" / "tables" / f"{s}.claims.json").read_text())
        assert claims(slurm_run["root"]) == claims(local_reference)


def test_full_scale_gpu_job_is_accepted_by_slurm(slurm, tmp_path):
    """`sbatch --test-only` accepts the call the plugin builds for a full-scale GPU job (--gpus=1)."""
    from test_cluster_profile import dry_run_jobs, sbatch_call

    root = copy_workflow(tmp_path / "wf")
    jobs = dry_run_jobs(root, "all", "--profile", "profiles/slurm", "--config", "scale=full")
    # the smallest full-scale GPU job: a test node has far less memory than a cluster node
    gpu_job = min((j for j in jobs if int(j["resources"].get("gpu", 0)) > 0),
                  key=lambda j: int(j["resources"].get("mem_mb", 0)))
    call = sbatch_call(gpu_job, workdir=str(tmp_path), logfile=str(tmp_path / "%j.log"))
    assert "--gpus=" in call
    proc = subprocess.run(call + " --test-only --wrap true", shell=True, capture_output=True, text=True)
    assert proc.returncode == 0 and "to start at" in proc.stderr, f"{call}\n{proc.stderr}"


def test_cluster_generic_profile_submits_with_sbatch(slurm, local_reference, tmp_path):
    """profiles/cluster-generic (the old `--cluster "sbatch ..."`): one study's data + one run."""
    study = smoke_studies()[0]
    cfg = yaml.safe_load((REPO / "config" / "studies" / f"{study}.yaml").read_text())
    method, seed = cfg["methods"][0], cfg["scales"]["smoke"].get("seeds", cfg.get("common", {}).get("seeds", [0]))[0]
    target = f"results/smoke/{study}/{method}/seed{seed}/metrics.json"
    root = copy_workflow(tmp_path / "wf")
    git_init(root)
    before = {r["JobId"] for r in _jobcomp(slurm)}
    proc = snakemake(root, target, "--profile", "profiles/cluster-generic", *_config([study]),
                     "--seconds-between-status-checks", "2", "--latency-wait", "5", timeout=900,
                     env=cluster_env())
    ids = re.findall(r"with external jobid '(\d+)'", proc.stdout + proc.stderr)
    assert len(ids) == 4, ids  # download, preprocess, train, evaluate
    rec = {r["JobId"]: r for r in _jobcomp(slurm) if r["JobId"] not in before}
    assert sorted(rec) == sorted(ids)
    assert {r["Name"] for r in rec.values()} == {f"icml25-{x}" for x in ("download", "preprocess", "train", "evaluate")}
    assert all(r["JobState"] == "COMPLETED" for r in rec.values()), rec
    ours = json.loads((root / target).read_text())
    ref = json.loads((local_reference / target).read_text())
    drop = lambda rows: sorted((r["setting"], r["metric"], r["value"]) for r in rows if not TIMING.search(r["metric"]))
    assert drop(ours["metrics"]) == drop(ref["metrics"])
