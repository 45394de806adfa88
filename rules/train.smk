# fit_base (studies that declare has_base; one per seed with base_per_seed) -> train, one job per (method, seed).


rule fit_base:
    input:
        "data/processed/{scale}/{study}/MANIFEST.json",
    output:
        "results/{scale}/{study}/base/MANIFEST.json",
    params:
        trigger=run_params,
    benchmark:
        bench("fit_base")
    log:
        "logs/fit_base/{scale}/{study}.log",
    threads: threads_for("fit_base")
    resources:
        mem_mb=res("fit_base", "mem_mb", 4000),
        runtime=res("fit_base", "runtime", 60),
        gpu=res("fit_base", "gpu", 0),
    conda:
        ENV
    shell:
        cli("fit-base") + " > {log} 2>&1"


# the same with one base model per run seed (a study's `base_per_seed: true`): base/seed<N>/
rule fit_base_seed:
    input:
        "data/processed/{scale}/{study}/MANIFEST.json",
    output:
        "results/{scale}/{study}/base/seed{seed}/MANIFEST.json",
    params:
        trigger=run_params,
    benchmark:
        bench("fit_base", seed=True)
    log:
        "logs/fit_base/{scale}/{study}/seed{seed}.log",
    threads: threads_for("fit_base")
    resources:
        mem_mb=res("fit_base", "mem_mb", 4000),
        runtime=res("fit_base", "runtime", 60),
        gpu=res("fit_base", "gpu", 0),
    conda:
        ENV
    shell:
        cli("fit-base", seed=True) + " > {log} 2>&1"


rule train:
    input:
        data="data/processed/{scale}/{study}/MANIFEST.json",
        base=base_input,
    output:
        "results/{scale}/{study}/{method}/seed{seed}/train.json",
    params:
        trigger=run_params,
    benchmark:
        bench("train", run=True)
    log:
        "logs/train/{scale}/{study}/{method}/seed{seed}.log",
    threads: threads_for("train")
    resources:
        mem_mb=res("train", "mem_mb", 4000),
        runtime=res("train", "runtime", 60),
        gpu=res("train", "gpu", 0),
    conda:
        ENV
    shell:
        cli("train", run=True) + " > {log} 2>&1"
