# Per-study table + claims, MLflow ingestion (single writer per study), metrics.parquet + summary.md.
# The figures rule and the report markup are in rules/report.smk.

localrules: table, track, summary


rule table:
    input:
        run_metrics,
    output:
        csv="results/{scale}/tables/{study}.csv",
        md="results/{scale}/tables/{study}.md",
        claims="results/{scale}/tables/{study}.claims.json",
        # the table and claim verdicts as a page of `snakemake --report` (category: the study)
        html=report(
            "results/{scale}/tables/{study}.html",
            caption="../report/table.rst",
            category="{study}",
            subcategory="table",
            labels={"study": "{study}", "item": "table and claims"},
        ),
        caption="results/{scale}/tables/{study}.caption.rst",
    params:
        trigger=run_params,
    benchmark:
        bench("table")
    log:
        "logs/table/{scale}/{study}.log",
    threads: 1
    conda:
        ENV
    shell:
        cli("table") + " > {log} 2>&1"


rule track:
    # The only MLflow writer: ingests a study's finished runs with batched calls under a file lock;
    # the study's figures are logged as artifacts (figures/) of each of its runs.
    input:
        runs=run_metrics,
        figures="results/{scale}/figures/{study}",
    output:
        "results/{scale}/{study}/mlflow_runs.json",
    params:
        uri=config["tracking_uri"],
        # the path of the login file of a server with a login; the secret itself never reaches argv
        creds=f"--tracking-credentials '{config['tracking_credentials']}'" if config.get("tracking_credentials") else "",
    benchmark:
        bench("track")
    log:
        "logs/track/{scale}/{study}.log",
    threads: 1
    conda:
        ENV
    shell:
        cli("track") + " --tracking-uri '{params.uri}' {params.creds} > {log} 2>&1"


rule summary:
    input:
        claims=lambda wc: expand("results/{scale}/tables/{study}.claims.json", scale=wc.scale, study=config["studies"]),
        metrics=all_run_metrics,
        # so that `snakemake all` also draws every study's figures (tracking on or off)
        figures=lambda wc: expand("results/{scale}/figures/{study}", scale=wc.scale, study=config["studies"]),
    output:
        md="results/{scale}/summary.md",
        parquet="results/{scale}/metrics.parquet",
    params:
        studies=" ".join(config["studies"]),
    benchmark:
        "benchmarks/{scale}/summary.tsv"
    log:
        "logs/summary/{scale}.log",
    threads: 1
    conda:
        ENV
    shell:
        "icml25 summary --scale {wildcards.scale} --studies {params.studies}"
        " --cpu-record benchmarks/{wildcards.scale}/summary.cpu.json > {log} 2>&1"
