# Per-study table + claims, MLflow ingestion (single writer per study), metrics.parquet + summary.md.

localrules: table, track, summary


rule table:
    input:
        run_metrics,
    output:
        csv="results/{scale}/tables/{study}.csv",
        md="results/{scale}/tables/{study}.md",
        claims="results/{scale}/tables/{study}.claims.json",
    params:
        trigger=run_params,
    log:
        "logs/table/{scale}/{study}.log",
    threads: 1
    conda:
        ENV
    shell:
        cli("table") + " > {log} 2>&1"


rule track:
    # The only MLflow writer: ingests a study's finished runs with batched calls under a file lock.
    input:
        run_metrics,
    output:
        "results/{scale}/{study}/mlflow_runs.json",
    params:
        uri=config["tracking_uri"],
    log:
        "logs/track/{scale}/{study}.log",
    threads: 1
    conda:
        ENV
    shell:
        cli("track") + " --tracking-uri '{params.uri}' > {log} 2>&1"


rule summary:
    input:
        claims=lambda wc: expand("results/{scale}/tables/{study}.claims.json", scale=wc.scale, study=config["studies"]),
        metrics=all_run_metrics,
    output:
        md="results/{scale}/summary.md",
        parquet="results/{scale}/metrics.parquet",
    params:
        studies=" ".join(config["studies"]),
    log:
        "logs/summary/{scale}.log",
    threads: 1
    conda:
        ENV
    shell:
        "icml25 summary --scale {wildcards.scale} --studies {params.studies} > {log} 2>&1"
