"""DRUNet (Zhang et al., DPIR), a pretrained non-blind denoiser: the full-scale denoising baseline and the
plug-and-play denoiser of the deblurring path (HQS, `baselines.pnp_hqs`).

The network is `deepinv.models.DRUNet` (deepinv 0.5.0) with deepinv's published pretrained weights, fetched
by the download stage from `drunet.url` (the URL deepinv's own `pretrained="download"` uses) and loaded
strictly. deepinv imports torchvision at import time, so the full scale needs torchvision beside it.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

WEIGHTS = "drunet.pth"  # the weights' name in the processed data directory


def fetch_weights(cfg: dict, raw_dir: Path, key: str = "drunet") -> Path:
    """Download cfg[key]['url'] to raw/<key>/<file> (sha256 checked where given; the data manifest records it).
    Shared by the pretrained baselines (DRUNet, WCRR-NN)."""
    from icml25.core.download import fetch

    d = cfg[key]
    return fetch(d["url"], raw_dir / key / d["file"], d.get("sha256"))


def stage_weights(cfg: dict, raw_dir: Path, out_dir: Path, key: str = "drunet", dest: str = WEIGHTS) -> None:
    """Copy the downloaded weights next to the processed images, where train / evaluate read them."""
    src = raw_dir / key / cfg[key]["file"]
    if not src.exists():
        from icml25.core.errors import UserError

        raise UserError(f"deal: missing {src}; run the download stage")
    shutil.copyfile(src, out_dir / dest)


def load(weights: Path, device="cpu", channels: int = 1):
    """deepinv's DRUNet for gray (1) or colour (3) images (default widths [64, 128, 256, 512], 4 residual
    blocks) with `weights`; strict loading, so weights of another architecture fail here."""
    import deepinv

    net = deepinv.models.DRUNet(in_channels=channels, out_channels=channels, pretrained=str(weights), device="cpu")
    return net.to(device).eval()


def denoiser_at(net, sigma255: float):
    """x -> DRUNet(x, sigma): deepinv takes the noise level in [0, 1] units."""
    def f(x):
        with torch.no_grad():
            return net(x, float(sigma255) / 255.0)
    return f


def pnp_strength(noise255: float, sigma_d255: float) -> float:
    """HQS penalty for a denoiser at sigma_d: the x-step minimises ||Hx - y||^2 / (2 s_n^2) +
    ||x - z||^2 / (2 s_d^2), i.e. mu = s_n^2 / s_d^2 in `pnp_hqs`'s ||Hx - y||^2 + mu ||x - z||^2 (DPIR's
    coupling of the penalty to the denoiser's noise level)."""
    return (float(noise255) / float(sigma_d255)) ** 2
