"""Running a converted rate-coded SNN (STA or SpikeZIP-TF) over the test set with spike-counting hooks.

Both rate baselines present the image at step 0 only, reset the network per batch and sum the logits over
the T steps; their hooks add spikes, SOPs and neurons into one `counts` dict, turned into per-image stats here.
"""
from __future__ import annotations

import torch


def image_at_step0(snn, x: torch.Tensor, T: int) -> torch.Tensor:
    """Logits summed over T steps of a multi-step SNN, the image at step 0 and zeros after it."""
    seq = torch.zeros((int(T), *x.shape), dtype=x.dtype)
    seq[0] = x
    return snn(seq).sum(0)


@torch.no_grad()
def run_counted(snn, hooks, test_x: torch.Tensor, batch: int, present, counts: dict, on_batch=None):
    """(logits, stats): `present(x)` gives a batch's logits; `hooks` [(module, fn)] are attached meanwhile
    and fill `counts` (spikes, sops, neurons); `on_batch()` runs after each reset."""
    from spikingjelly.activation_based import functional

    handles = [m.register_forward_hook(fn) for m, fn in hooks]
    outs = []
    try:
        for i in range(0, len(test_x), batch):
            x = test_x[i:i + batch]
            functional.reset_net(snn)
            if on_batch is not None:
                on_batch()
            outs.append(present(x))
    finally:
        for h in handles:
            h.remove()
    n = len(test_x)
    return torch.cat(outs), {"spikes": counts["spikes"] / n, "sops": counts["sops"] / n,
                             "neurons": counts["neurons"] / n,
                             "spikes_per_neuron": counts["spikes"] / max(counts["neurons"], 1)}
