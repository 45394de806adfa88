"""W2, the frequency watermark: Tree-Ring's "ring" pattern (official `tr_utils.py`).

P = fftshift(FFT2(g)) for a Gaussian g drawn with seed 999999; for r = R..1 every frequency inside the
disk of radius r is set to P[0, c, 0, r], which gives concentric constant rings. The key is written into
the disk of radius R on one channel of fftshift(FFT2(z_T)) and z_T is the real part of the inverse FFT.
The detection score is d = mean |FFT(z_T_hat)[M] - P[M]| * 0.01 (lower = watermarked).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def circle_mask(size: int, r: int) -> np.ndarray:
    """The official `circle_mask`: centre (size//2, size//2) on a y axis that runs upwards (y = y[::-1]),
    i.e. the disk sits one row above the fftshift centre of an even grid; kept as the official code has it."""
    x0 = y0 = size // 2
    y, x = np.ogrid[:size, :size]
    y = y[::-1]
    return ((x - x0) ** 2 + (y - y0) ** 2) <= r**2


@dataclass
class TreeRing:
    shape: tuple  # (C, H, W)
    radius: int
    channel: int
    pattern: torch.Tensor  # complex (C, H, W)
    mask: torch.Tensor  # bool (C, H, W)

    @classmethod
    def build(cls, shape, radius: int, channel: int, seed: int = 999999) -> "TreeRing":
        c, h, w = (int(x) for x in shape)
        if h != w:
            raise ValueError("Tree-Ring needs a square latent")
        channel = channel % c  # -1 = the last channel
        g = torch.randn((1, c, h, w), generator=torch.Generator().manual_seed(int(seed)))
        p = torch.fft.fftshift(torch.fft.fft2(g), dim=(-1, -2))[0]
        ring = p.clone()
        for r in range(int(radius), 0, -1):
            disk = torch.from_numpy(circle_mask(h, r))
            for j in range(c):
                ring[j, disk] = p[j, 0, r].item()
        mask = torch.zeros((c, h, w), dtype=torch.bool)
        mask[channel] = torch.from_numpy(circle_mask(h, int(radius)))
        return cls((c, h, w), int(radius), channel, ring, mask)

    def inject(self, z: torch.Tensor) -> torch.Tensor:
        f = torch.fft.fftshift(torch.fft.fft2(z.to(torch.float32)), dim=(-1, -2))
        f[:, self.mask] = self.pattern[self.mask].to(f.dtype)
        return torch.fft.ifft2(torch.fft.ifftshift(f, dim=(-1, -2))).real.to(torch.float32)

    def distance(self, z_hat: torch.Tensor) -> np.ndarray:
        """Per latent: mean |FFT(z_hat)[M] - P[M]| * 0.01 (the official l1_complex measurement)."""
        f = torch.fft.fftshift(torch.fft.fft2(z_hat.to(torch.float32)), dim=(-1, -2))
        diff = (f[:, self.mask] - self.pattern[self.mask][None]).abs()
        return (diff.mean(dim=1) * 0.01).numpy().astype(np.float64)
