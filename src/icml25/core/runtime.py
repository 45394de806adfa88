"""Threads and seeds, set in one place for every stage."""
from __future__ import annotations

import os
import random
import sys

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
_threads = 1


def threads() -> int:
    """The cores this stage was given (--threads; Snakemake's `threads`), e.g. for run_tasks' worker count."""
    return _threads


def set_threads(n: int) -> None:
    """Pin torch/BLAS threads: oversubscribing 2 cores is 5-40x slower than one thread per job."""
    global _threads
    _threads = int(n)
    for var in _THREAD_VARS:
        os.environ[var] = str(n)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass
    # torch reads OMP_NUM_THREADS when imported; pin it explicitly only if it is already loaded,
    # so light stages (table, track) do not pay for importing it.
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(n)
        if torch.get_num_interop_threads() != n:
            try:
                torch.set_num_interop_threads(n)
            except RuntimeError:
                pass  # only settable before the first parallel op; harmless afterwards


def seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def run_tasks(calls: list, workers: int) -> list:
    """Results of independent calls [(fn, args), ...] in call order, on `workers` single-thread processes.

    Many small models train faster as parallel one-thread processes than as one process with more torch
    threads. workers <= 1 runs them here, in order; every task must seed itself, so the results are the same
    either way. fn must be importable (module level): workers are spawned, not forked, so no torch/OpenMP
    state is inherited. Calls are started in list order: put the longest first.
    """
    if workers <= 1 or len(calls) <= 1:
        return [fn(*args) for fn, args in calls]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(int(workers), len(calls)), mp_context=ctx,
                             initializer=set_threads, initargs=(1,)) as pool:
        futures = [pool.submit(fn, *args) for fn, args in calls]
        return [f.result() for f in futures]


# --- where a study's torch stages run -----------------------------------------------------------------------
# The `device` setting: cpu (smoke, mini), cuda, or auto (CUDA when there is one: the full scale). torch is
# imported inside the functions: studies' validate() calls check_device, and light stages must not load torch.
DEVICES = ("cpu", "cuda", "auto")


def check_device(cfg: dict) -> str:
    """The `device` setting of a study config (cpu when unset), refused unless one of DEVICES."""
    want = str(cfg.get("device", "cpu"))
    if want not in DEVICES:
        from .errors import UserError

        raise UserError(f"{cfg.get('study', 'study')}: device must be one of {', '.join(DEVICES)}, got {want!r}")
    return want


def device_of(cfg: dict):
    """The resolved torch.device of a config's `device` setting; cuda without a CUDA device is refused."""
    import torch

    want = check_device(cfg)
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    elif want == "cuda" and not torch.cuda.is_available():
        from .errors import UserError

        raise UserError(f"{cfg.get('study', 'study')}: device: cuda, but torch sees no CUDA device here "
                        f"(torch.cuda.is_available() is False; torch {torch.__version__}, built for CUDA "
                        f"{torch.version.cuda}); set device: auto or cpu")
    return torch.device(want)


def host_state(model) -> dict:
    """A module's state dict with every tensor on the CPU, for torch.save: a checkpoint that loads anywhere
    (the module versions in `_metadata` kept, as load_state_dict expects)."""
    sd = model.state_dict()
    out = type(sd)((k, v.detach().cpu()) for k, v in sd.items())
    if hasattr(sd, "_metadata"):
        out._metadata = sd._metadata
    return out
