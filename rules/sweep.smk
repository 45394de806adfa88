# Budget sweeps: `snakemake sweep --config scale=mini` runs every configured study that declares budget
# knobs (scales.<scale>.sweep) at each factor, as derived scales <scale>-x<f> through the same rules, and
# writes results/<scale>/sweeps/. `snakemake all` never runs it.


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
        spec = icfg.sweep_spec(study_raw(s), wc.scale)
        for f in sorted(set(spec["factors"])):
            sc = wc.scale if int(f) == 1 else f"{wc.scale}-x{int(f)}"
            out.append(f"results/{sc}/tables/{s}.claims.json")
            if config.get("tracking", True):
                out.append(f"results/{sc}/{s}/mlflow_runs.json")
    return out


rule sweep_tables:
    input:
        sweep_inputs,
    output:
        "results/{scale}/sweeps/summary.md",
    params:
        studies=lambda wc: " ".join(sweep_studies(wc.scale)),
    log:
        "logs/sweep/{scale}.log",
    threads: 1
    conda:
        ENV
    shell:
        "icml25 sweep --scale {wildcards.scale} --studies {params.studies} > {log} 2>&1"
localrules: sweep_tables
