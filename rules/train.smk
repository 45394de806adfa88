# fit_base (studies that declare has_base) -> train, one job per (method, seed).


def base_input(wc):
    return [f"results/{wc.scale}/{wc.study}/base/MANIFEST.json"] if has_base(wc.study) else []


rule fit_base:
    input:
        "data/processed/{scale}/{study}/MANIFEST.json",
    output:
        "results/{scale}/{study}/base/MANIFEST.json",
    params:
        trigger=run_params,
    log:
        "logs/fit_base/{scale}/{study}.log",
    threads: THREADS
    resources:
        mem_mb=res("fit_base", "mem_mb", 4000),
        runtime=res("fit_base", "runtime", 60),
        gpu=res("fit_base", "gpu", 0),
    conda:
        ENV
    shell:
        CLI.format(stage="fit-base") + " > {log} 2>&1"


rule train:
    input:
        data="data/processed/{scale}/{study}/MANIFEST.json",
        base=base_input,
    output:
        "results/{scale}/{study}/{method}/seed{seed}/train.json",
    params:
        trigger=run_params,
    log:
        "logs/train/{scale}/{study}/{method}/seed{seed}.log",
    threads: THREADS
    resources:
        mem_mb=res("train", "mem_mb", 4000),
        runtime=res("train", "runtime", 60),
        gpu=res("train", "gpu", 0),
    conda:
        ENV
    shell:
        CLI.format(stage="train") + " --method {wildcards.method} --seed {wildcards.seed} > {log} 2>&1"
