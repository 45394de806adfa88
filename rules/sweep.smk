# Budget sweeps: `snakemake sweep --config scale=mini` runs every configured study that declares budget
# knobs (scales.<scale>.sweep) at each factor, as derived scales <scale>-x<f> through the same rules, and
# writes results/<scale>/sweeps/. `snakemake all` never runs it.


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
