# download -> preprocess. Outputs are manifests (file list + sha256) written last; data/ is DVC-tracked.


rule data:
    # Build every configured study's data (the DVC flow: `snakemake data`, `dvc add data`, `dvc push`).
    input:
        expand("data/processed/{scale}/{study}/MANIFEST.json", scale=SCALE, study=config["studies"]),


rule download:
    output:
        "data/raw/{scale}/{study}/MANIFEST.json",
    params:
        trigger=data_params,
    benchmark:
        bench("download")
    log:
        "logs/download/{scale}/{study}.log",
    threads: THREADS
    resources:
        mem_mb=res("download", "mem_mb", 2000),
        runtime=res("download", "runtime", 30),
        gpu=res("download", "gpu", 0),
    conda:
        ENV
    shell:
        cli("download") + " > {log} 2>&1"


rule preprocess:
    input:
        "data/raw/{scale}/{study}/MANIFEST.json",
    output:
        "data/processed/{scale}/{study}/MANIFEST.json",
    params:
        trigger=data_params,
    benchmark:
        bench("preprocess")
    log:
        "logs/preprocess/{scale}/{study}.log",
    threads: THREADS
    resources:
        mem_mb=res("preprocess", "mem_mb", 4000),
        runtime=res("preprocess", "runtime", 30),
        gpu=res("preprocess", "gpu", 0),
    conda:
        ENV
    shell:
        cli("preprocess") + " > {log} 2>&1"
