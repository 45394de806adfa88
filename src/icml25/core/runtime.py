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
