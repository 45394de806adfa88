"""Image distortions applied before detection (both images of a pair get the same one, same seed).

Images travel as uint8 RGB arrays, as the official code's PNG files do. Rotation follows the official
`Affine`: torchvision-style affine on the [-1, 1] tensor, nearest interpolation, fill 0 (mid grey).
"""
from __future__ import annotations

import io
import math

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageEnhance, ImageFilter

from icml25.core.errors import UserError

from .distortion_kinds import KINDS, check  # noqa: F401  (the light half: config validation)


def to_uint8(x: torch.Tensor) -> np.ndarray:
    """[-1, 1] tensors (N, 3, H, W) -> uint8 images (N, H, W, 3): the PNG quantisation of a saved image."""
    return ((x.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


def to_tensor(imgs: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(imgs)).permute(0, 3, 1, 2).float() / 127.5 - 1


def _rotate(imgs: np.ndarray, degrees: float) -> np.ndarray:
    x = to_tensor(imgs)
    a = math.radians(degrees)
    n = x.shape[0]
    theta = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]]).expand(n, 2, 3)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    out = F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)  # zeros = grey
    return to_uint8(out)


def apply(spec: dict, imgs: np.ndarray, seed: int) -> np.ndarray:
    """Distort a batch of uint8 images (N, H, W, 3) as `spec` says; `seed` fixes any randomness (the same
    seed for the watermarked and the clean image of a pair)."""
    kind = spec["kind"]
    rng = np.random.default_rng(seed)
    if kind == "clean":
        return imgs.copy()
    if kind == "rotate":
        return _rotate(imgs, float(spec["degrees"]))
    out = []
    for i, a in enumerate(imgs):
        img = Image.fromarray(a)
        h, w = a.shape[:2]
        if kind == "crop_resize":  # centre crop keeping `ratio` of each side, resized back
            ch, cw = max(1, round(h * spec["ratio"])), max(1, round(w * spec["ratio"]))
            top, left = (h - ch) // 2, (w - cw) // 2
            img = img.crop((left, top, left + cw, top + ch)).resize((w, h), Image.BILINEAR)
        elif kind == "jpeg":
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=int(spec["quality"]))
            img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
        elif kind == "blur":
            img = img.filter(ImageFilter.GaussianBlur(radius=float(spec["radius"])))
        elif kind == "median":
            img = img.filter(ImageFilter.MedianFilter(int(spec["k"])))
        elif kind == "noise":  # additive N(0, std) in [0, 1] units, clipped (see README: the official wraps)
            arr = a.astype(np.float64) + rng.normal(0, float(spec["std"]), a.shape) * 255
            img = Image.fromarray(np.clip(arr, 0, 255).round().astype(np.uint8))
        elif kind == "brightness":
            img = ImageEnhance.Brightness(img).enhance(float(spec["factor"]))
        elif kind == "resize":
            s = max(1, int(h * float(spec["ratio"])))
            img = img.resize((s, s), Image.BILINEAR).resize((w, h), Image.BILINEAR)
        elif kind == "random_crop":  # keep a random window of `ratio`, zero the rest (official)
            nh, nw = int(h * spec["ratio"]), int(w * spec["ratio"])
            y, x = rng.integers(0, h - nh + 1), rng.integers(0, w - nw + 1)
            b = np.zeros_like(a)
            b[y:y + nh, x:x + nw] = a[y:y + nh, x:x + nw]
            img = Image.fromarray(b)
        elif kind == "random_drop":  # zero a random window of `ratio` (official)
            nh, nw = int(h * spec["ratio"]), int(w * spec["ratio"])
            y, x = rng.integers(0, h - nh + 1), rng.integers(0, w - nw + 1)
            b = a.copy()
            b[y:y + nh, x:x + nw] = 0
            img = Image.fromarray(b)
        elif kind == "salt_pepper":
            r = rng.random(a.shape)
            b = np.where(r > 1 - spec["p"] / 2, 0, a)
            b = np.where(r < spec["p"] / 2, 255, b).astype(np.uint8)
            img = Image.fromarray(b)
        else:
            raise UserError(f"gaussmarker: unknown distortion kind '{kind}'; known: {', '.join(KINDS)}")
        out.append(np.asarray(img.convert("RGB"), dtype=np.uint8))
    return np.stack(out)
