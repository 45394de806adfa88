"""Threads and seeds, set in one place for every stage."""
from __future__ import annotations

import os
import random
import sys

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def set_threads(n: int) -> None:
    """Pin torch/BLAS threads: oversubscribing 2 cores is 5-40x slower than one thread per job."""
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
