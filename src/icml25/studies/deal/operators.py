"""Forward operators and classic closed-form solvers on periodic images (FFT), in torch.

The blur is a circular convolution with a normalised Gaussian kernel (||H|| = 1), so H^T is the
convolution with the flipped kernel (the conjugate in Fourier); finite differences are periodic too.
"""
from __future__ import annotations

import numpy as np
import torch


def to_batch(im, device=None) -> torch.Tensor:
    """A gray (h, w) or colour (c, h, w) image -> a (1, c, h, w) tensor."""
    t = torch.as_tensor(im, device=device)
    return t[None, None] if t.ndim == 2 else t[None]


def from_batch(t: torch.Tensor) -> np.ndarray:
    """(1, c, h, w) -> (h, w) for one channel, else (c, h, w); numpy on the host."""
    return (t[0, 0] if t.shape[1] == 1 else t[0]).cpu().numpy()


def gaussian_kernel(size: int, sigma: float) -> np.ndarray:
    r = np.arange(size) - (size - 1) / 2
    g = np.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / (2 * sigma ** 2))
    return (g / g.sum()).astype(np.float32)


def otf(kernel: np.ndarray, shape, device=None) -> torch.Tensor:
    """The kernel's transfer function on an image of `shape` (centre of the kernel at pixel 0)."""
    k = np.zeros(shape, dtype=np.float64)
    kh, kw = kernel.shape
    k[:kh, :kw] = kernel
    k = np.roll(k, (-(kh // 2), -(kw // 2)), axis=(0, 1))
    return torch.as_tensor(np.fft.fft2(k), dtype=torch.complex64, device=device)


def _same_device(have: torch.device, want: torch.device) -> bool:
    """`cuda` asks for the current GPU: a tensor on cuda:0 is there."""
    return have.type == want.type and (want.index is None or have.index == want.index)


class OnDevice:
    """`to(device)` for the operators: itself when already there, else one copy per device, made on the first
    call and reused by every later one (the solvers ask for the device on each image and hyperparameter)."""

    def device(self) -> torch.device:
        raise NotImplementedError

    def copy_to(self, device: torch.device):
        raise NotImplementedError

    def to(self, device):
        device = torch.device(device)
        if _same_device(self.device(), device):
            return self
        copies = self.__dict__.setdefault("_copies", {})
        if device not in copies:
            copies[device] = self.copy_to(device)
        return copies[device]


class Blur(OnDevice):
    """y = k * x (circular) for images (B, c, h, w), each channel alike; `shape` is (h, w)."""

    def __init__(self, kernel: np.ndarray, shape, device=None):
        self.kernel, self.shape = kernel, tuple(shape)
        self.K = otf(kernel, shape, device)

    def device(self) -> torch.device:
        return self.K.device

    def copy_to(self, device) -> "Blur":
        return Blur(self.kernel, self.shape, device)

    def A(self, x):
        return torch.fft.ifft2(torch.fft.fft2(x) * self.K).real

    def At(self, y):
        return torch.fft.ifft2(torch.fft.fft2(y) * self.K.conj()).real


def fd_symbol(shape, device=None) -> torch.Tensor:
    """|D_x|^2 + |D_y|^2 of periodic forward differences."""
    h, w = shape
    wy = torch.fft.fftfreq(h).view(-1, 1) * 2 * np.pi
    wx = torch.fft.fftfreq(w).view(1, -1) * 2 * np.pi
    return (4 * torch.sin(wy / 2) ** 2 + 4 * torch.sin(wx / 2) ** 2).to(device=device, dtype=torch.float32)


def tikhonov(y, lam: float, blur: Blur | None = None):
    """argmin_x 1/2||Hx - y||^2 + lam/2 ||D x||^2, closed form in Fourier (H = I without a blur)."""
    Y = torch.fft.fft2(y)
    D2 = fd_symbol(y.shape[-2:], y.device)
    if blur is None:
        X = Y / (1 + lam * D2)
    else:
        X = blur.K.conj() * Y / (blur.K.abs() ** 2 + lam * D2)
    return torch.fft.ifft2(X).real


def psnr(x, ref) -> float:
    mse = float(((np.clip(x, 0, 1) - ref) ** 2).mean())
    return 10 * np.log10(1.0 / max(mse, 1e-20))


def ssim(x, ref) -> float:
    from skimage.metrics import structural_similarity

    # colour (c, h, w): the mean SSIM over the channels
    return float(structural_similarity(np.clip(x, 0, 1).astype(np.float64), ref.astype(np.float64), data_range=1.0,
                                       channel_axis=0 if ref.ndim == 3 else None))
