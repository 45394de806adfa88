"""The cluster profiles' resource declarations, checked without a cluster: a full-scale dry run through
profiles/slurm resolves, and every job of a rule that a study sizes with `gpu: N` carries the request."""
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO, cluster_env, copy_workflow, snakemake

# The plugins are not in the default venv (see scripts/cluster/plugins.py): only these runs load them.
CLUSTER_ENV = cluster_env()

_RULE = re.compile(r"^\s*(?:local)?rule (\w+):$")
_FIELD = re.compile(r"^\s+(wildcards|resources): (.*)$")


def dry_run_jobs(root: Path, *args: str) -> list[dict]:
    """Jobs of `snakemake -n` as dicts: rule, wildcards, resources (values as strings)."""
    out = snakemake(root, *args, "-n", env=CLUSTER_ENV).stdout
    jobs = []
    for line in out.splitlines():  # group jobs print their member rules indented
        if m := _RULE.match(line):
            jobs.append({"rule": m.group(1), "wildcards": {}, "resources": {}})
        elif (m := _FIELD.match(line)) and jobs:
            jobs[-1][m.group(1)] = dict(kv.split("=", 1) for kv in m.group(2).split(", ") if "=" in kv)
    return jobs


def expected_gpus(scale: str) -> dict[tuple[str, str], int]:
    """(study, rule) -> gpus, from config/studies/<study>.yaml (scales.<scale>.resources.<rule>.gpu)."""
    studies = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]
    out = {}
    for s in studies:
        raw = yaml.safe_load((REPO / "config" / "studies" / f"{s}.yaml").read_text())
        for rule, res in (raw.get("scales", {}).get(scale, {}).get("resources") or {}).items():
            if res.get("gpu"):
                out[(s, rule)] = int(res["gpu"])
    return out


@pytest.fixture(scope="module")
def full_dry_run(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("fulldry") / "wf")
    return dry_run_jobs(root, "all", "--profile", "profiles/slurm", "--config", "scale=full")


def test_full_scale_dry_run_resolves_with_slurm_profile(full_dry_run):
    rules = {j["rule"] for j in full_dry_run}
    assert {"download", "preprocess", "train", "evaluate", "table", "summary", "all"} <= rules, rules
    for j in full_dry_run:
        if j["rule"] in ("download", "preprocess", "fit_base", "train", "evaluate"):
            res = j["resources"]
            assert int(res["mem_mb"]) > 0 and int(res["runtime"]) > 0, j


def test_gpu_rules_carry_the_gpu_request(full_dry_run):
    want = expected_gpus("full")
    assert want, "no study declares a GPU at full scale; nothing to check"
    seen = {k: 0 for k in want}
    for j in full_dry_run:
        key = (j["wildcards"].get("study"), j["rule"])
        gpu = int(j["resources"].get("gpu", 0))
        if key in want:
            assert gpu == want[key], f"{key}: gpu={gpu}, config says {want[key]}: {j}"
            seen[key] += 1
        else:
            assert gpu == 0, f"{key} asks for {gpu} GPU(s) but its study declares none: {j}"
    assert all(seen.values()), f"no jobs for {[k for k, n in seen.items() if not n]}"


def test_plugin_turns_gpu_resource_into_sbatch_gpus(full_dry_run):
    """The slurm plugin's own code builds `--gpus=N` (and --mem/-t) from a full-scale GPU job."""
    gpu_job = next(j for j in full_dry_run if int(j["resources"].get("gpu", 0)) > 0)
    call = sbatch_call(gpu_job)
    res = gpu_job["resources"]
    assert f"--gpus={res['gpu']}" in call and f"--mem {res['mem_mb']}" in call and f"-t {res['runtime']}" in call, call
    cpu_job = next(j for j in full_dry_run if j["rule"] == "evaluate" and int(j["resources"].get("gpu", 0)) == 0)
    assert "--gpus" not in sbatch_call(cpu_job)


class _Res(dict):
    __getattr__ = dict.__getitem__


class _Job:
    def __init__(self, job: dict, threads: int = 1):
        res = {}
        for k, v in job["resources"].items():
            if k in ("mem_mb", "runtime", "gpu", "mem_mib", "disk_mb", "disk_mib"):
                res[k] = int(v) if v.isdigit() else None
        self.resources = _Res({k: v for k, v in res.items() if v is not None})
        self.threads = threads


def sbatch_call(job: dict, workdir: str = "/tmp", logfile: str = "/tmp/%j.log") -> str:
    """The sbatch command line snakemake-executor-plugin-slurm builds for a dry-run job."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    j = _Job(job)
    params = {"run_uuid": "icml25_check", "slurm_logfile": logfile, "comment_str": f"rule_{job['rule']}",
              "account": "", "partition": "", "workdir": workdir}
    return get_submit_command(j, params) + set_gres_string(j)
