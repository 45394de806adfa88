"""With identical weights at the paper's widths (channels [1, 4, 8, 128], 9x9 kernels), our DEAL's denoising
inference matches `deepinv.models.DEAL` (deepinv's port of the official code), used here only as an
inference oracle (its training path is broken in 0.5.0). The `deepinv` fixture is in deal_deepinv.py."""
from __future__ import annotations

import pytest
import torch

from icml25.studies.deal.deal_model import DEAL
from deal_deepinv import deepinv  # noqa: F401  (the fixture)


def _copy_weights(ours: DEAL, impl) -> None:
    sd = {}
    for mc in ("W1", "M1"):
        for j, w in enumerate(getattr(ours, mc).weights):
            key = f"{mc}.conv_layers.{j}." + ("parametrizations.weight.original" if j == 0 else "weight")
            sd[key] = w.detach().clone()
    for name in ("M2.weight", "M3.weight"):
        sd[name] = ours.state_dict()[name].clone()
    for sp in ("spline1", "spline2", "spline3", "spline_lambda", "spline_scaling"):
        sd[f"{sp}.coefficients"] = getattr(ours, sp).coefficients.detach().clone()
    missing, unexpected = impl.load_state_dict(sd, strict=False)
    assert not unexpected
    assert all(not k.endswith(("weight", "original", "coefficients")) for k in missing), missing


@pytest.mark.parametrize("color", [False, True], ids=["gray", "colour"])
def test_inference_matches_deepinv_deal(deepinv, color):
    """Gray [1, 4, 8, 128] and the official colour model [3, 12, 24, 128] (its own spectral-norm estimate)."""
    torch.manual_seed(0)
    ours = DEAL([3, 12, 24, 128] if color else [1, 4, 8, 128], 9)
    with torch.no_grad():  # splines off their initialisation, so the test sees them
        for name, p in ours.named_parameters():
            if "spline" in name:
                p.add_(0.05 * torch.randn_like(p))
    oracle = deepinv.models.DEAL(pretrained=None, device="cpu", clamp_output=False, inner_iter=200, outer_iter=8,
                                 color=color)
    _copy_weights(ours, oracle.model)
    oracle.model.eval()
    g = torch.Generator().manual_seed(1)
    clean = torch.rand(2, 3 if color else 1, 24, 24, generator=g)
    y = clean + 25 / 255 * torch.randn(clean.shape, generator=g)
    with torch.no_grad():
        ref = oracle(y, sigma=25 / 255)  # deepinv takes sigma in [0, 1] units
        got = ours.denoise(y, 25.0, n_out=8, n_in=200, eps_in=1e-12, eps_out=1e-5)
    assert float((got - y).abs().max()) > 1e-2  # it does denoise
    assert float((got - ref).abs().max()) < 1e-4
