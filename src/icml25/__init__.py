"""icml25: reproductions of ICML 2025 papers behind one Snakemake target.

Kept import-free on purpose: the Snakefile imports `icml25.core` at DAG-build time, and a no-op
`snakemake -n` must not pay for torch, pandas or mlflow.
"""
__version__ = "0.1.0"
