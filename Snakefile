# icml25: one target reproduces every configured study, raw data -> results table.
#   snakemake all                      # results/<scale>/summary.md for config/config.yaml's scale (mini)
#   snakemake all --config scale=smoke # seconds per study, for tests
#   snakemake results/mini/tables/sand.md   # one study's table
# Every rule calls the `icml25` CLI; see rules/*.smk.
from snakemake.utils import min_version

min_version("9.0")

from icml25.core import snakemake_reeval

# one pending scheduler wake-up at a time (Snakemake piles up a 1-s timer per finished job)
snakemake_reeval.apply()

configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/tables.smk"
include: "rules/report.smk"
include: "rules/sweep.smk"


# Local runs: one warm interpreter forks every job (src/icml25/core/forkserver.py), so a job does not import torch
# and transformers again (≈ 4 CPU-s each); the numbers are the same. Off with --config fork_server=false.
# (only where the run has a job that imports torch: for a few light jobs its 4 CPU-s of preloading are not worth it)
onstart:
    if (config.get("fork_server", True) and workflow.local_exec and not workflow.touch
            and any(j.rule.name.startswith(("fit_base", "train", "evaluate")) for j in workflow.dag.needrun_jobs())):
        from icml25.core import forkserver

        _FORK_SERVER.append(forkserver.start(Path("logs/forkserver.log")))

onsuccess:
    _stop_fork_server()

onerror:
    _stop_fork_server()


rule all:
    default_target: True
    input:
        all_targets(SCALE),


# `snakemake sweep --config scale=mini`: the budget sweeps (rules/sweep.smk), never part of `all`
rule sweep:
    input:
        f"results/{SCALE}/sweeps/summary.md",
