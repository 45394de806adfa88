# evaluate: final metrics of one (method, seed) run -> metrics.json with provenance.


rule evaluate:
    input:
        data="data/processed/{scale}/{study}/MANIFEST.json",
        base=base_input,
        train="results/{scale}/{study}/{method}/seed{seed}/train.json",
    output:
        "results/{scale}/{study}/{method}/seed{seed}/metrics.json",
    params:
        trigger=run_params,
    benchmark:
        bench("evaluate", run=True)
    log:
        "logs/evaluate/{scale}/{study}/{method}/seed{seed}.log",
    threads: threads_for("evaluate")
    resources:
        mem_mb=res("evaluate", "mem_mb", 4000),
        runtime=res("evaluate", "runtime", 30),
        gpu=res("evaluate", "gpu", 0),
    conda:
        ENV
    shell:
        cli("evaluate", run=True) + " > {log} 2>&1"
