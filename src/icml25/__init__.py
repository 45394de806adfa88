"""icml25: reproductions of ICML 2025 papers behind one Snakemake target.

Kept import-free on purpose: the Snakefile imports `icml25.core` at DAG-build time, and a no-op
`snakemake -n` must not pay for torch, pandas or mlflow.
"""
import os as _os

__version__ = "0.1.0"

# torch's CPU kernels pinned to the AVX2 instruction set (unless the user chose one): AVX-512 and AVX2 kernels
# round differently, and small models trained for hundreds of steps turn that into different results (measured:
# chameleon's mini proxy puts 0.983 on one domain with AVX-512 kernels, 0.631 with AVX2, same seed and code).
# Every x86 machine these runs have met has AVX2; torch reads the variable at its first CPU op, so it must be set
# before any torch work: every job imports icml25 first. `ATEN_CPU_CAPABILITY=default|avx512` overrides it.
if _os.uname().machine in ("x86_64", "AMD64"):
    _os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
