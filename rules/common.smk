# Config loading, validation and enumeration of studies/methods/seeds. Imports only light modules
# (a no-op `snakemake -n` must stay fast).
from pathlib import Path

from snakemake.utils import validate

from icml25.core import config as icfg
from icml25.core import provenance
from icml25.core import sweep as icsweep

# `--config tracking=false` arrives as a string
for _flag in ("tracking", "fork_server"):
    if isinstance(config.get(_flag), str):
        config[_flag] = config[_flag].strip().lower() in ("true", "1", "yes")
validate(config, "../config/config.schema.yaml")

# the run's warm fork server, started in the Snakefile's onstart (src/icml25/core/forkserver.py)
_FORK_SERVER = []


def _stop_fork_server():
    for h in _FORK_SERVER:
        h.stop()


ROOT = Path(workflow.basedir)
SCALE = config["scale"]
THREADS = int(config["threads"])
ENV = "../envs/icml25.yaml"

wildcard_constraints:
    scale=r"(smoke|mini|full)(-x[1-9][0-9]*|-(?!x[0-9])[a-z][a-z0-9_]*)?",
    study="[a-z][a-z0-9_]*",
    method="[a-z][a-z0-9_]*",
    seed=r"\d+",


_RAW = {}


def study_raw(study):
    """The study's yaml, validated once per Snakemake invocation."""
    if study not in _RAW:
        try:
            _RAW[study] = icfg.load_study(ROOT, study)
        except icfg.UserError as exc:
            raise WorkflowError(str(exc)) from None
    return _RAW[study]


def study_cfg(study, scale):
    try:
        return icfg.effective(study_raw(study), scale)
    except icfg.UserError as exc:
        raise WorkflowError(str(exc)) from None


for _s in config["studies"]:
    study_raw(_s)


def has_base(study):
    return bool(study_raw(study).get("has_base", False))


def run_dirs(study, scale):
    cfg = study_cfg(study, scale)
    return [f"results/{scale}/{study}/{m}/seed{s}" for m, s in icfg.runs(cfg)]


def base_per_seed(study, scale):
    """One base model per run seed (`base_per_seed: true` at the scale): a claim's seed interval then includes
    the base model's randomness, at fit_base's cost times the seeds."""
    return bool(study_cfg(study, scale).get("base_per_seed", False))


def base_input(wc):
    if not has_base(wc.study):
        return []
    if base_per_seed(wc.study, wc.scale):
        return [f"results/{wc.scale}/{wc.study}/base/seed{wc.seed}/MANIFEST.json"]
    return [f"results/{wc.scale}/{wc.study}/base/MANIFEST.json"]


def run_metrics(wc):
    return [f"{d}/metrics.json" for d in run_dirs(wc.study, wc.scale)]


def all_run_metrics(wc):
    return [f"{d}/metrics.json" for s in config["studies"] for d in run_dirs(s, wc.scale)]


def res(rule_name, key, default):
    """Per-study, per-scale resources from config/studies/<study>.yaml (scales.<scale>.resources.<rule>)."""

    def get(wc):
        r = study_cfg(wc.study, wc.scale).get("resources", {}).get(rule_name, {})
        return r.get(key, default)

    return get


def threads_for(rule_name):
    """A study may give one of its stages more cores (scales.<scale>.resources.<rule>.threads), e.g. for
    independent proxy runs; Snakemake scales it down to --cores, and on SLURM it becomes cpus_per_task."""

    def get(wc):
        r = study_cfg(wc.study, wc.scale).get("resources", {}).get(rule_name, {})
        return int(r.get("threads", THREADS))

    return get


# Rerun triggers: rules call a CLI, so Snakemake cannot see code changes itself. These hashes are
# rule params; changing one study's config or code reruns only that study's jobs.
def data_params(wc):
    cfg = study_cfg(wc.study, wc.scale)
    return f'{icfg.config_hash(cfg.get("data", {}))}-{provenance.code_hash(wc.study, "data*.py", ROOT)}'


def _result_cfg(wc):
    return icfg.result_config(study_cfg(wc.study, wc.scale))


def run_params(wc):
    cfg = _result_cfg(wc)
    # figures*.py only draw pictures: editing them must not retrain (see figure_params)
    return f'{icfg.config_hash(cfg)}-{provenance.code_hash(wc.study, root=ROOT, exclude="figures*.py")}'


def figure_params(wc):
    cfg = _result_cfg(wc)
    return f'{icfg.config_hash(cfg)}-{provenance.code_hash(wc.study, "figures*.py", ROOT)}'


def all_targets(scale):
    out = [f"results/{scale}/summary.md", f"results/{scale}/metrics.parquet"]
    if config.get("tracking", True):
        out += [f"results/{scale}/{s}/mlflow_runs.json" for s in config["studies"]]
    return out


def bench(rule_name, run=False, seed=False):
    """Snakemake's benchmark file of a per-study job (wall s, CPU s, max RSS, I/O), read by
    `icml25 bench`: benchmarks/<scale>/<rule>/<study>[/<method>/seed<seed> | /seed<seed>].tsv."""
    job = "{study}/{method}/seed{seed}" if run else "{study}/seed{seed}" if seed else "{study}"
    return f"benchmarks/{{scale}}/{rule_name}/{job}.tsv"


def cli(stage, run=False, seed=False):
    """The shell command of a per-study stage (placeholders are filled by Snakemake). --cpu-record puts
    the job's exact CPU (getrusage) beside its benchmark file: Snakemake only samples CPU (every 0.5 s,
    then every 30 s) and misses what a job spends after its last sample (measured: 3.4 of 9.1 s)."""
    job = ("{wildcards.study}/{wildcards.method}/seed{wildcards.seed}" if run
           else "{wildcards.study}/seed{wildcards.seed}" if seed else "{wildcards.study}")
    record = f"benchmarks/{{wildcards.scale}}/{stage.replace('-', '_')}/{job}.cpu.json"
    run_args = (" --method {wildcards.method} --seed {wildcards.seed}" if run
                else " --seed {wildcards.seed}" if seed else "")
    return (f"icml25 {stage} --scale {{wildcards.scale}} --study {{wildcards.study}} --threads {{threads}}"
            f"{run_args} --cpu-record {record}")


# Budget sweeps (rules/sweep.smk): the studies that declare knobs at a scale and each factor's tables.
def sweep_studies(scale):
    have = [s for s in config["studies"] if (study_raw(s)["scales"].get(scale) or {}).get("sweep")]
    if not have:
        raise WorkflowError(
            f"no configured study declares a budget knob at scale '{scale}' (studies: {', '.join(config['studies'])}); "
            f"add scales.{scale}.sweep.knobs to config/studies/<study>.yaml")
    return have


def sweep_inputs(wc):
    out = []
    for s in sweep_studies(wc.scale):
        for _, sc in icsweep.scales(study_raw(s), wc.scale):
            out.append(f"results/{sc}/tables/{s}.claims.json")
            if config.get("tracking", True):
                out.append(f"results/{sc}/{s}/mlflow_runs.json")
    return out
