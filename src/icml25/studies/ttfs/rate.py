"""Rate-coded baseline: spikingjelly's STA Transformer conversion (`STATransformerRecipe`, ICLR'24 STA).

Mode "spiking_encoder": calibrated bipolar spike encoders at the outputs of LayerNorm, GELU and attention
(the affine layers integrate them online); T time steps, the input presented at step 0 and the logits read
out as the sum over steps (spikingjelly's own ImageNet example). A spike count is |encoder output| /
threshold per step (an encoder may emit a burst of several spikes in one step); SOPs are spikes times the
fan-out of the layer each encoder drives. spikingjelly's STA backend has no SiLU module, so the EVA-like
model has no rate baseline (n.a.).
"""
from __future__ import annotations

import torch

from .rate_run import image_at_step0, run_counted


def supported(model) -> bool:
    from .vit import Mlp

    return all(isinstance(b.mlp, Mlp) for b in model.blocks)


def _fanout(model, name: str) -> int:
    """Synapses per neuron of the layer an encoder feeds (from the module names of the converted graph)."""
    d = model.patch_embed.out_features
    if name.endswith("norm1_sta_encoder"):
        return 3 * d                      # -> attention in_proj (q, k, v)
    if name.endswith("norm2_sta_encoder"):
        return model.blocks[0].mlp.fc1.out_features
    if name.endswith("act_sta_encoder"):
        return d                          # -> fc2
    if name.endswith("attn_sta_encoder"):
        return d                          # -> out_proj
    if name.startswith("norm"):
        return model.head.out_features    # final LayerNorm -> head
    return 1


@torch.no_grad()
def run(model, calib_x, test_x, T: int, batch: int = 200):
    """(logits, stats) of the STA-converted model at T steps."""
    from spikingjelly.activation_based import functional
    from spikingjelly.activation_based.ann2snn import Converter, STATransformerRecipe

    rec = STATransformerRecipe(dataloader=[(calib_x, None)], time_steps=int(T), mode="spiking_encoder",
                               threshold_mode="mse")
    snn = Converter(recipe=rec, device="cpu").convert(model).eval()
    functional.set_step_mode(snn, "m")
    encoders = [(n, m) for n, m in snn.named_modules() if type(m).__name__ == "_STASpikeEncoder"]
    if not encoders:
        raise RuntimeError("STA conversion produced no spike encoders")
    counts = {"spikes": 0.0, "sops": 0.0, "neurons": 0.0}

    def hook(name):
        def fn(mod, inp, out):
            thr = mod.v_threshold.to(out.dtype)
            n = (out / thr).abs().round()          # spikes per neuron per step (bursts count each spike)
            counts["spikes"] += float(n.sum())
            counts["sops"] += float(n.sum()) * _fanout(model, name)
            counts["neurons"] += out[0].numel()    # one step's worth of neurons
        return fn

    return run_counted(snn, [(m, hook(n)) for n, m in encoders], test_x, batch,
                       lambda x: image_at_step0(snn, x, T), counts)
