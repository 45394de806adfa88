"""The baselines: noisy input, finite-difference Tikhonov (closed form), TV (scikit-image's Chambolle
solver; FISTA with it as the proximal map for deblurring), and a small DnCNN (residual, blind, trained on
the same patches), also used as a plug-and-play denoiser (HQS) for deblurring."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .operators import Blur, from_batch, to_batch


def tv_denoise(y: np.ndarray, weight: float, iters: int = 100) -> np.ndarray:
    from skimage.restoration import denoise_tv_chambolle

    # colour (c, h, w): scikit-image's channel-wise TV
    return denoise_tv_chambolle(y.astype(np.float64), weight=weight, max_num_iter=iters,
                                channel_axis=0 if y.ndim == 3 else None).astype(np.float32)


def tv_deblur(y: np.ndarray, blur: Blur, weight: float, iters: int = 50, prox_iters: int = 30) -> np.ndarray:
    """FISTA on 1/2||Hx - y||^2 + weight TV(x), step 1 (||H|| = 1), Chambolle's TV denoiser as the prox."""
    blur = blur.to("cpu")  # Chambolle's prox is scikit-image: numpy on the host
    yt = to_batch(np.asarray(y, dtype=np.float32))
    return tv_inverse(yt, blur.A, blur.At, weight, blur.At(yt), iters, prox_iters)


def tv_inverse(yt, A, At, weight: float, x0, iters: int = 50, prox_iters: int = 30) -> np.ndarray:
    """FISTA from x0 for any operator with ||A|| <= 1 (step 1): the blur, MRI or CT; on the host."""
    x = z = x0
    t = 1.0
    for _ in range(iters):
        g = z - At(A(z) - yt)
        x_new = to_batch(tv_denoise(from_batch(g), weight, prox_iters))
        t_new = (1 + (1 + 4 * t * t) ** 0.5) / 2
        z = x_new + ((t - 1) / t_new) * (x_new - x)
        x, t = x_new, t_new
    return from_batch(x)


class DnCNN(nn.Module):
    """conv-ReLU, (depth - 2) x conv-ReLU, conv; predicts the noise (residual learning), no batch norm."""

    def __init__(self, depth: int = 8, features: int = 32, channels: int = 1):
        super().__init__()
        layers = [nn.Conv2d(channels, features, 3, padding=1), nn.ReLU(inplace=True)]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(features, features, 3, padding=1), nn.ReLU(inplace=True)]
        layers.append(nn.Conv2d(features, channels, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, y):
        return y - self.body(y)


@torch.no_grad()
def pnp_hqs(y: np.ndarray, blur: Blur, denoiser, mu: float, iters: int = 20) -> np.ndarray:
    """Plug-and-play HQS: x = argmin ||Hx - y||^2 + mu ||x - z||^2 (Fourier), z = D(x)."""
    yt = to_batch(np.asarray(y, dtype=np.float32), blur.K.device)
    Y = torch.fft.fft2(yt)
    z = blur.At(yt)
    x = z
    for _ in range(iters):
        x = torch.fft.ifft2((blur.K.conj() * Y + mu * torch.fft.fft2(z)) / (blur.K.abs() ** 2 + mu)).real
        z = denoiser(x)
    return from_batch(z)
