"""Where bood's torch stages run: the `device` setting (cpu | cuda | auto; auto = CUDA when available).

Every model and every batch goes through `place`, so one function decides the device (and a test can watch
it). Random draws stay on the host (the same draws on every device) and are moved afterwards; checkpoints
are written from the host (`host_state`), so they load anywhere.
"""
from __future__ import annotations

from icml25.core.errors import UserError

# torch is imported inside the functions: study.validate reads CHOICES, and every stage's light start-up
# (`icml25 noop`, the table / summary stages) must not import torch.

CHOICES = ("cpu", "cuda", "auto")


def device_of(cfg: dict) -> torch.device:
    """The resolved `device` of a config (cpu when unset: mini and smoke)."""
    import torch

    want = str(cfg.get("device", "cpu"))
    if want not in CHOICES:
        raise UserError(f"bood: device must be one of {', '.join(CHOICES)}, got {want!r}")
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    elif want == "cuda" and not torch.cuda.is_available():
        raise UserError("bood: device: cuda, but torch sees no CUDA device here (torch.cuda.is_available() is "
                        "False); set device: auto or cpu")
    return torch.device(want)


def place(obj, device: torch.device):
    """A model or a tensor on `device` (the host's own objects unchanged when device is the CPU)."""
    return obj.to(device)


def host_state(model: "torch.nn.Module") -> dict:
    """The state dict with every tensor on the CPU, for torch.save (its version metadata kept)."""
    sd = model.state_dict()
    out = type(sd)((k, v.detach().cpu()) for k, v in sd.items())
    if hasattr(sd, "_metadata"):
        out._metadata = sd._metadata
    return out
