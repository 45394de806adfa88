"""icml25: reproductions of ICML 2025 papers behind one Snakemake target.

Kept import-free on purpose: the Snakefile imports `icml25.core` at DAG-build time, and a no-op
`snakemake -n` must not pay for torch, pandas or mlflow.
"""
__version__ = "0.1.0"

# One numeric path on every x86-64 CPU (core/numeric_pin.py): torch's kernels, its MKL and oneDNN, and numpy's
# OpenBLAS each pick kernels by CPU, and a small model trained for hundreds of steps turns their rounding into other
# results (measured: chameleon's mini proxy put 0.983 on one domain with AVX-512 kernels, 0.631 with AVX2). The
# libraries read the variables when they load, so every job imports icml25 first; a variable already set wins.
from .core import numeric_pin as _numeric_pin

_numeric_pin.apply()
