"""Datasets: sklearn digits (8x8, bundled), Fashion-MNIST (Debian `dataset-fashion-mnist`, IDX files) and,
at full scale, ImageNet-1k validation images (a local folder, as the paper's evaluation set).

Every dataset is stored as uint8 images (n, C, H, W) plus labels in one npz per split.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = {"train_x": "train-images-idx3-ubyte.gz", "train_y": "train-labels-idx1-ubyte.gz",
                 "test_x": "t10k-images-idx3-ubyte.gz", "test_y": "t10k-labels-idx1-ubyte.gz"}
# (Debian recompresses the gzip files, so Zalando's published md5 sums do not apply; the data manifest
# records the digests instead)


def _idx(path: Path, offset: int) -> np.ndarray:
    return np.frombuffer(gzip.open(path).read(), np.uint8, offset=offset)


def fashion_mnist(root: Path = FASHION_DIR):
    """(train_x, train_y, test_x, test_y) of Fashion-MNIST from its gzip IDX files."""
    missing = [f for f in FASHION_FILES.values() if not (Path(root) / f).exists()]
    if missing:
        raise UserError(f"Fashion-MNIST files {missing} not found in {root}: "
                        "`apt-get install dataset-fashion-mnist` (Debian) provides them")
    r = Path(root)
    tx = _idx(r / FASHION_FILES["train_x"], 16).reshape(-1, 1, 28, 28)
    ty = _idx(r / FASHION_FILES["train_y"], 8)
    vx = _idx(r / FASHION_FILES["test_x"], 16).reshape(-1, 1, 28, 28)
    vy = _idx(r / FASHION_FILES["test_y"], 8)
    return tx, ty, vx, vy


def digits(seed: int, n_train: int):
    """sklearn's 1,797 8x8 digits (values 0..16, scaled to 0..255), split with a fixed seed."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)[:, None]
    idx = np.random.default_rng(seed).permutation(len(x))
    tr, te = idx[:n_train], idx[n_train:]
    return x[tr], d.target[tr].astype(np.int64), x[te], d.target[te].astype(np.int64)


def _subset(x, y, n, rng):
    if n is None or n >= len(x):
        return x, y
    # class-balanced: the same number of images per class, drawn with the data seed
    per = n // len(np.unique(y))
    keep = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per] for c in np.unique(y)])
    keep = rng.permutation(keep)
    return x[keep], y[keep]


def build(name: str, spec: dict, seed: int, raw_dir: Path | None = None):
    """One dataset's (train_x, train_y, test_x, test_y) at the sizes of `spec`."""
    rng = np.random.default_rng(seed)
    if name == "digits":
        tx, ty, vx, vy = digits(seed, int(spec.get("n_train", 1400)))
    elif name == "fmnist":
        tx, ty, vx, vy = fashion_mnist(Path(spec.get("root", FASHION_DIR)))
        ty, vy = ty.astype(np.int64), vy.astype(np.int64)
    elif name == "imagenet":
        from .full import imagenet_val

        return imagenet_val(raw_dir, spec)
    else:
        raise UserError(f"ttfs: unknown dataset '{name}'; known: digits, fmnist, imagenet")
    tx, ty = _subset(tx, ty, spec.get("n_train"), rng)
    vx, vy = _subset(vx, vy, spec.get("n_test"), rng)
    size = spec.get("image")
    if size and size != tx.shape[-1]:
        tx, vx = _resize(tx, size), _resize(vx, size)
    return tx, ty, vx, vy


def _resize(x: np.ndarray, size: int) -> np.ndarray:
    """Area downsampling by an integer factor (e.g. 28 -> 14)."""
    f = x.shape[-1] // size
    if f * size != x.shape[-1]:
        raise UserError(f"ttfs: image size {x.shape[-1]} is not a multiple of {size}")
    n, c, h, w = x.shape
    return x.reshape(n, c, size, f, size, f).mean(axis=(3, 5)).round().astype(np.uint8)


def save(path: Path, x, y) -> None:
    from icml25.core.io import write_npz

    write_npz(path, x=x, y=y)


def load(path: Path):
    with np.load(path) as z:
        return z["x"], z["y"]


def to_float(x: np.ndarray):
    """uint8 images -> float pixels in [0, 1] (the TTFS input code's interval)."""
    import torch

    return torch.as_tensor(x, dtype=torch.float32) / 255.0
