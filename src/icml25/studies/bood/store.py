"""A split stored for lazy reading: uint8 images (n, C, H, W) in `<name>.images.npy`, opened as a numpy
memmap, and int64 labels in `<name>.labels.npy`.

Used where one float32 array per split does not fit (ImageNet-100 at 224 px is ~19 GB as uint8, ~78 GB
as float32). Indexing an `ImageStore` reads only the rows asked for and scales them to float32 in [0, 1],
the same values the array splits hold, so the training and evaluation code takes either.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

IMAGES, LABELS = "{}.images.npy", "{}.labels.npy"


def exists(data_dir: Path, name: str) -> bool:
    return (Path(data_dir) / IMAGES.format(name)).exists()


class ImageStore:
    """Read-only view of a stored split: `len`, `shape` (as float images), `store[idx]` -> float32 rows."""

    def __init__(self, data_dir: Path, name: str):
        self.images = np.load(Path(data_dir) / IMAGES.format(name), mmap_mode="r")
        self.labels = np.load(Path(data_dir) / LABELS.format(name))
        self.shape = self.images.shape
        self.dtype = np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx) -> np.ndarray:
        if isinstance(idx, slice):
            rows = self.images[idx]
        else:  # fancy indexing on a memmap reads just these rows, in the order asked
            rows = self.images[np.asarray(idx, dtype=np.int64)]
        return rows.astype(np.float32) / np.float32(255.0)


class StoreWriter:
    """Writes n uint8 images of one shape straight into the memmap file, one at a time (never all in RAM)."""

    def __init__(self, data_dir: Path, name: str, n: int, shape: tuple[int, int, int]):
        self.dir, self.name = Path(data_dir), name
        self.images = np.lib.format.open_memmap(self.dir / IMAGES.format(name), mode="w+", dtype=np.uint8,
                                                shape=(n, *shape))
        self.labels = np.full(n, -1, np.int64)

    def put(self, i: int, image: np.ndarray, label: int = -1) -> None:
        self.images[i] = image
        self.labels[i] = label

    def close(self) -> None:
        self.images.flush()
        del self.images
        np.save(self.dir / LABELS.format(self.name), self.labels)


def save_float(data_dir: Path, name: str, x: np.ndarray, y: np.ndarray | None = None) -> None:
    """Store float images in [0, 1] (e.g. decoded outliers) as uint8, rounded."""
    w = StoreWriter(data_dir, name, len(x), tuple(x.shape[1:]))
    w.images[:] = np.clip(np.rint(np.asarray(x) * 255.0), 0, 255).astype(np.uint8)
    if y is not None:
        w.labels[:] = y
    w.close()
