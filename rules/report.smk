# Figures per study and the `snakemake --report` markup.
#   snakemake all --report report.html   # tables + figures of every configured study, one category each
# Captions are templates in report/ (rendered by Snakemake with Jinja2, then reStructuredText): they
# include the per-study text the table stage writes (paper, stand-ins at this scale, claims, verdicts)
# and the per-figure text the figures stage writes.

localrules: figures

report: "../report/workflow.rst"


rule figures:
    # results/<scale>/figures/<study>/: <name>.png + <name>.rst per figure and figures.json (empty for a
    # study without a figures hook). See src/icml25/core/figures.py.
    input:
        runs=run_metrics,
        claims="results/{scale}/tables/{study}.claims.json",
    output:
        report(
            directory("results/{scale}/figures/{study}"),
            patterns=["{name}.png"],
            caption="../report/figure.rst",
            category="{study}",
            subcategory="figures",
            labels={"study": "{study}", "item": "{name}"},
        ),
    params:
        trigger=figure_params,
    benchmark:
        bench("figures")
    log:
        "logs/figures/{scale}/{study}.log",
    threads: 1
    conda:
        ENV
    shell:
        cli("figures") + " > {log} 2>&1"
