"""Where bood's torch stages run: the `device` setting (cpu | cuda | auto; auto = CUDA when available).

Every model and every batch goes through `place`, so one function decides the device (and a test can watch
it). Random draws stay on the host (the same draws on every device) and are moved afterwards; checkpoints
are written from the host (`host_state`), so they load anywhere.
"""
from __future__ import annotations

from icml25.core.runtime import DEVICES as CHOICES, device_of, host_state  # noqa: F401 (bood's names for them)

# torch stays out of module level: study.validate reads CHOICES, and every stage's light start-up
# (`icml25 noop`, the table / summary stages) must not import torch.


def place(obj, device: "torch.device"):
    """A model or a tensor on `device` (the host's own objects unchanged when device is the CPU)."""
    return obj.to(device)
