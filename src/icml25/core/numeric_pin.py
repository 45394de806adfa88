"""One numeric path on every x86-64 CPU: the kernel choices that `import icml25` pins, and a read-back of what
a process actually runs.

A small model trained for hundreds of steps turns a last-bit rounding difference into another model, so the
kernels must not depend on the CPU. Each library picks its own by CPU, and each has its own switch:

  ATEN_CPU_CAPABILITY=avx2       torch's own vectorised kernels (read when torch loads)
  MKL_ENABLE_INSTRUCTIONS=AVX2   torch's BLAS (MKL, linked into libtorch_cpu): caps MKL's dispatch at AVX2, as
                                 the ATen pin caps torch's (an AVX-512 Xeon otherwise runs AVX-512 sgemm)
  MKL_CBWR=AVX2                  MKL's conditional-numerical-reproducibility branch: on Intel CPUs the AVX2
                                 branch, documented to give the same bits on every Intel CPU with AVX2. On a
                                 non-Intel CPU MKL honours only COMPATIBLE and runs AUTO (measured here: MKL_VERBOSE
                                 reports `CNR:AUTO` on an AMD EPYC for AVX2, AVX, SSE4_2)
  ONEDNN_MAX_CPU_ISA=AVX2        torch's oneDNN kernels (convolutions), which JIT for the widest ISA present
  OPENBLAS_CORETYPE=Haswell      numpy's / scipy's OpenBLAS, which picks AVX-512 kernels on CPUs that have them
  NPY_DISABLE_CPU_FEATURES=X86_V4 AVX512_ICL AVX512_SPR
                                 numpy's own SIMD loops (ufuncs, reductions, sorts), which dispatch to AVX-512 where
                                 the CPU has it: measured on an AVX-512 Xeon, np.exp's bits and np.argsort's order
                                 of ties change with it (so does ficgcn's RCM-ordered schedule); disabling the
                                 AVX-512 targets leaves X86_V3 (AVX2), what an AVX2-only CPU runs

Not pinned by default: MKL_CBWR=COMPATIBLE, the one branch Intel documents as the same on Intel and non-Intel
CPUs. It is measured 2-3x slower on this project's models (docs/performance.md), which would put the mini far
past its hour; a user who needs Intel == AMD bits sets it (and re-stamps: its bits differ from AUTO's).
On the AMD EPYC (Zen 2) this was built on, the default pins give the same bits as no pins at all (measured), so
references made there before the pin stay valid there.

Each is set only where the environment has not set it, so a user may choose otherwise; the reference stamp
records what a run had. GPUs, ARM CPUs and other BLAS builds are not covered.
Kept free of torch/numpy imports: `import icml25` calls `apply()` before either loads.
"""
from __future__ import annotations

import os
import platform
import sys

PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "MKL_CBWR": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
}
# numpy's dispatch targets wider than AVX2 (numpy 2.x names); a CPU without them ignores their disabling
NPY_WIDE = ("X86_V4", "AVX512_ICL", "AVX512_SPR")
PINS["NPY_DISABLE_CPU_FEATURES"] = " ".join(NPY_WIDE)


def is_x86() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


def cpu_vendor() -> str:
    """The CPU's vendor string (GenuineIntel, AuthenticAMD, ...; 'unknown' off Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def expected_mkl_cnr(cbwr: str | None = None) -> str:
    """The CNR branch MKL should report for MKL_CBWR=`cbwr` (default: this process's setting): the branch itself
    on an Intel CPU; on any other, AUTO unless COMPATIBLE (the only branch MKL honours there)."""
    cbwr = (cbwr or os.environ.get("MKL_CBWR") or "AUTO").upper()
    if cbwr.startswith("COMPATIBLE") or cpu_vendor() == "GenuineIntel":
        return cbwr
    return "AUTO" + cbwr[cbwr.index(","):] if "," in cbwr else "AUTO"


def apply() -> None:
    """Set the pins the environment leaves unset (x86-64 only: the variables mean nothing elsewhere)."""
    if is_x86():
        for var, value in PINS.items():
            os.environ.setdefault(var, value)


def settings() -> dict:
    """The pin variables as this process's environment has them ('unset' where absent)."""
    return {var: os.environ.get(var, "unset") for var in PINS}


def _captured_stdout(fn) -> str:
    """What fn() makes C code print on file descriptor 1 (MKL's and oneDNN's verbose lines)."""
    import ctypes
    import tempfile

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")


def _field(text: str, key: str) -> str:
    for tok in text.replace(",", " ").split():
        if tok.startswith(key):
            return tok[len(key):]
    return "not reported"


def read_back() -> dict:
    """The kernels this process runs, asked of the libraries themselves (not of the environment): torch's CPU
    capability, MKL's CNR branch and oneDNN's ISA (from their verbose lines on one tiny matmul and one tiny
    convolution), the OpenBLAS core numpy loaded (threadpoolctl), and the widest SIMD target numpy dispatches to.
    Only libraries already loaded are asked, so a stage that never imported torch does not pay for it here."""
    out: dict = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["aten_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        if torch.backends.mkl.is_available():
            def matmul():
                with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                    torch.ones(8, 8) @ torch.ones(8, 8)
            out["mkl_cnr"] = _field(_captured_stdout(matmul), "CNR:")
        if torch.backends.mkldnn.is_available():
            def conv():
                with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                    torch.nn.functional.conv2d(torch.ones(4, 3, 32, 32), torch.ones(8, 3, 3, 3))  # big enough for oneDNN
            text = _captured_stdout(conv)
            # the ISA header prints once per process; the convolution's own kernel name (jit:avx2) every time
            isa = [ln.split("isa:", 1)[1].strip() for ln in text.splitlines() if "isa:" in ln]
            impl = [f for ln in text.splitlines() if ",convolution," in ln for f in ln.split(",") if f.startswith("jit")]
            out["onednn_isa"] = isa[0] if isa else "not reported"
            out["onednn_conv"] = impl[0] if impl else "not reported"
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_info

            out["openblas_core"] = ", ".join(sorted({str(i.get("architecture")) for i in threadpool_info()
                                                     if i.get("internal_api") == "openblas"})) or "none loaded"
        except ImportError:
            out["openblas_core"] = "threadpoolctl absent"
        out["numpy_simd"] = numpy_simd()
    return out


def numpy_simd() -> str:
    """The widest of numpy's dispatch targets that this process enables (X86_V3 is AVX2); 'not reported' where
    numpy does not expose them."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:
        return "not reported"
    on = [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]
    return on[-1] if on else "baseline"


def mismatches(read: dict) -> list[str]:
    """What in a `read_back()` is not the pinned path (empty when every library asked runs it)."""
    want = {"aten_cpu_capability": PINS["ATEN_CPU_CAPABILITY"].upper(), "mkl_cnr": expected_mkl_cnr(PINS["MKL_CBWR"]),
            "openblas_core": PINS["OPENBLAS_CORETYPE"]}
    out = [f"{k}: {read[k]} (pinned: {v})" for k, v in want.items() if k in read and read[k].lower() != v.lower()]
    out += [f"{k}: {read[k]} (pinned: AVX2 or narrower)" for k in ("onednn_isa", "onednn_conv")
            if "avx512" in read.get(k, "").lower().replace("-", "")]
    if read.get("numpy_simd") in NPY_WIDE:
        out.append(f"numpy_simd: {read['numpy_simd']} (pinned: X86_V3 or narrower)")
    return out
