"""Shared HuggingFace glue for studies whose models are trained in the pipeline at mini scale and loaded
from the Hub at full scale through the same `from_pretrained` call."""
from __future__ import annotations

import os


def quiet() -> None:
    """No progress bars or info logs in job logs. The Hub is left reachable: a full-scale config names Hub
    ids; a local directory (what the mini scale saves) never contacts it."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def device():
    """The GPU when there is one (full scale), else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
