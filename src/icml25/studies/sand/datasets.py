"""Datasets for the SAND study (Pad et al., ICML 2025).

Mini/smoke scale uses only offline sources:

* ``digits``         sklearn ``load_digits`` (1797 x 64, 10 classes), k = 16
* ``madelon_like``   ``make_classification`` with the Madelon structure (5 informative +
                     5 redundant columns, 8 clusters/class, 90 noise columns); with
                     ``shuffle=False`` the relevant features are columns 0..9, k = 10
* ``madelon500``     the same recipe at Madelon's size: 500 columns, 20 relevant (5 informative +
                     15 redundant, columns 0..19), 8 clusters/class, 480 noise columns, k = 20
* ``breast_cancer``  sklearn ``load_breast_cancer`` (569 x 30, 2 classes), k = 5
* ``mnist1d``        generated procedurally with ``mnist1d.data.make_dataset`` (40 features,
                     10 classes; its own 80/20 train/test split), k = 10
* ``diabetes``       sklearn ``load_diabetes`` as regression (442 x 10), k = 3.  The target is
                     *standardised* with the training mean/std (so MAE is reported in units of
                     the training-set standard deviation of y, ~77 raw units).
* ``fashion``        real Fashion-MNIST IDX files from Debian ``dataset-fashion-mnist``
                     (md5-verified), subsampled (``n_train``/``n_test`` opts), pixels / 255, k = 60

``acquire`` writes the raw form, ``preprocess`` turns it deterministically into one ``.npz``
with ``X_train, y_train, X_val, y_val, X_test, y_test`` (float32 / int64; float32 y for
regression) and ``relevant`` (int64 indices, empty unless planted).  Features are standardised
with train statistics (constant columns get std 1).

``FULL_SOURCES`` lists the paper's real datasets for full scale; ``load_full`` parses the raw
formats we know (MNIST/Fashion IDX, UCI Madelon text, ISOLET csv, HAR txt, California housing).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

DATASETS: dict[str, dict[str, Any]] = {
    "digits": {"task": "clf", "k": 16},
    "madelon_like": {"task": "clf", "k": 10},
    "madelon500": {"task": "clf", "k": 20},
    "breast_cancer": {"task": "clf", "k": 5},
    "mnist1d": {"task": "clf", "k": 10},
    "diabetes": {"task": "reg", "k": 3},
    "fashion": {"task": "clf", "k": 60},
}

# the Madelon-like recipe (make_classification, 5 informative columns, 8 clusters per class) at two sizes:
# name -> (n_features, n_redundant); relevant = the first 5 + n_redundant columns (shuffle=False)
MADELON_SHAPES = {"madelon_like": (100, 5), "madelon500": (500, 15)}

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MD5 = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
# md5 of the *decompressed* official files (as published e.g. in torchvision's FashionMNIST
# ``raw_data`` list).  Debian's package re-gzips the files without the stored file name (gzip
# header 24 bytes shorter), so the .gz md5 differs while the content is byte-identical; we
# accept a file if either the .gz md5 or the decompressed md5 is the official one.
FASHION_RAW_MD5 = {
    "train-images-idx3-ubyte.gz": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte.gz": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte.gz": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte.gz": "15d484375f8d13e6eb1aabb0c3f46965",
}

# Defaults for generation / preprocessing options (overridable via ``opts``).
DEFAULT_OPTS: dict[str, Any] = {
    "data_seed": 0,          # seed for generated sets (madelon_like, mnist1d) and for splits
    "split_seed": None,      # seed for train/val/test splits; None -> data_seed
    "val_fraction": 0.15,    # fraction of the training part used for validation
    "test_fraction": 0.2,    # for sets without an official test split
    "madelon_n_samples": 2600,
    "mnist1d_n_samples": 5000,
    "n_train": 6000,         # fashion subsample (train+val are carved from it)
    "n_test": 2000,          # fashion test subsample
}


def _opt(opts: dict | None, key: str):
    if opts and key in opts and opts[key] is not None:
        return opts[key]
    return DEFAULT_OPTS[key]


def md5sum(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256sum(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_fashion_file(p: Path, fname: str) -> str:
    """Check one Fashion-MNIST file against the official checksums; return which one matched."""
    got = md5sum(p)
    if got == FASHION_MD5[fname]:
        return "gz_md5"
    raw = hashlib.md5(gzip.decompress(Path(p).read_bytes())).hexdigest()
    if raw == FASHION_RAW_MD5[fname]:
        return "content_md5"
    raise ValueError(f"{p}: md5 {got} (content {raw}) matches neither the official .gz md5 "
                     f"{FASHION_MD5[fname]} nor the official content md5 {FASHION_RAW_MD5[fname]}")


def _save_npz(path: Path, **arrays) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------------------
# IDX / UCI parsers (also used by load_full)
# --------------------------------------------------------------------------------------
def _open_maybe_gz(path: Path) -> bytes:
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def read_idx(path: Path) -> np.ndarray:
    """Parse an IDX file (optionally gzipped): uint8 images (idx3) or labels (idx1)."""
    data = _open_maybe_gz(path)
    magic = int.from_bytes(data[0:4], "big")
    if (magic >> 8) != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {magic:#x})")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    off = 4 + 4 * ndim
    arr = np.frombuffer(data, dtype=np.uint8, offset=off)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: size mismatch {arr.size} vs {dims}")
    return arr.reshape(dims)


def read_uci_madelon(data_path: Path, labels_path: Path | None) -> tuple[np.ndarray, np.ndarray | None]:
    """UCI Madelon: whitespace-separated integers, one sample a line; labels file has +-1."""
    X = np.loadtxt(data_path, dtype=np.float64, ndmin=2)
    y = None
    if labels_path is not None:
        lab = np.loadtxt(labels_path, dtype=np.int64, ndmin=1)
        y = (lab > 0).astype(np.int64)
    return X, y


# --------------------------------------------------------------------------------------
# acquire
# --------------------------------------------------------------------------------------
def acquire(name: str, raw_dir: Path, opts: dict | None = None) -> list[Path]:
    """Write the raw form of dataset ``name`` into ``raw_dir``; return the written paths."""
    raw_dir = Path(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    opts = dict(opts or {})
    if name == "digits":
        from sklearn.datasets import load_digits
        d = load_digits()
        return [_save_npz(raw_dir / "digits.npz", X=d.data.astype(np.float32), y=d.target.astype(np.int64))]
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer
        d = load_breast_cancer()
        return [_save_npz(raw_dir / "breast_cancer.npz", X=d.data.astype(np.float32), y=d.target.astype(np.int64))]
    if name == "diabetes":
        from sklearn.datasets import load_diabetes
        d = load_diabetes(scaled=False)
        return [_save_npz(raw_dir / "diabetes.npz", X=d.data.astype(np.float32), y=d.target.astype(np.float32))]
    if name in MADELON_SHAPES:
        from sklearn.datasets import make_classification
        seed = int(_opt(opts, "data_seed"))
        n_features, n_redundant = MADELON_SHAPES[name]
        X, y = make_classification(
            n_samples=int(_opt(opts, "madelon_n_samples")), n_features=n_features, n_informative=5,
            n_redundant=n_redundant, n_repeated=0, n_classes=2, n_clusters_per_class=8, flip_y=0.01,
            shuffle=False, random_state=seed)
        return [_save_npz(raw_dir / f"{name}.npz", X=X.astype(np.float32), y=y.astype(np.int64),
                          relevant=np.arange(5 + n_redundant, dtype=np.int64))]
    if name == "mnist1d":
        from mnist1d.data import get_dataset_args, make_dataset
        args = get_dataset_args()
        args.num_samples = int(_opt(opts, "mnist1d_n_samples"))
        args.seed = int(_opt(opts, "data_seed"))
        state = np.random.get_state()  # make_dataset reseeds the global numpy RNG
        try:
            d = make_dataset(args)
        finally:
            np.random.set_state(state)
        return [_save_npz(raw_dir / "mnist1d.npz",
                          X=np.asarray(d["x"], np.float32), y=np.asarray(d["y"], np.int64),
                          X_test=np.asarray(d["x_test"], np.float32), y_test=np.asarray(d["y_test"], np.int64))]
    if name == "fashion":
        src = Path(opts.get("fashion_dir", FASHION_DIR))
        out = []
        for fname, md5 in FASHION_MD5.items():
            p = src / fname
            if not p.exists():
                raise FileNotFoundError(
                    f"{p} not found: install the Debian package with `apt-get install dataset-fashion-mnist`")
            verify_fashion_file(p, fname)
            dest = raw_dir / fname
            tmp = raw_dir / f".{fname}.tmp"
            shutil.copyfile(p, tmp)
            os.replace(tmp, dest)
            out.append(dest)
        return out
    raise KeyError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")


# --------------------------------------------------------------------------------------
# preprocess
# --------------------------------------------------------------------------------------
def _split(n: int, frac: float, rng: np.random.Generator, stratify: np.ndarray | None):
    """Return (idx_a, idx_b) with |idx_b| ~ frac*n; stratified when labels are given."""
    if stratify is None:
        perm = rng.permutation(n)
        nb = int(round(frac * n))
        return np.sort(perm[nb:]), np.sort(perm[:nb])
    a, b = [], []
    for c in np.unique(stratify):
        idx = np.flatnonzero(stratify == c)
        idx = idx[rng.permutation(len(idx))]
        nb = int(round(frac * len(idx)))
        b.append(idx[:nb])
        a.append(idx[nb:])
    return np.sort(np.concatenate(a)), np.sort(np.concatenate(b))


def _subsample(n: int, m: int | None, rng: np.random.Generator) -> np.ndarray:
    if m is None or m >= n:
        return np.arange(n)
    return np.sort(rng.choice(n, size=int(m), replace=False))


def split_and_scale(name: str, X: np.ndarray, y: np.ndarray, X_test: np.ndarray | None,
                    y_test: np.ndarray | None, opts: dict | None, task: str) -> dict[str, np.ndarray]:
    seed = _opt(opts, "split_seed")
    seed = int(_opt(opts, "data_seed") if seed is None else seed)
    rng = np.random.default_rng([seed, 12345])
    strat = y if task == "clf" else None
    if X_test is None:
        tr, te = _split(len(y), float(_opt(opts, "test_fraction")), rng, strat)
        X, y, X_test, y_test = X[tr], y[tr], X[te], y[te]
    tr, va = _split(len(y), float(_opt(opts, "val_fraction")), rng, y if task == "clf" else None)
    Xtr, ytr, Xva, yva = X[tr], y[tr], X[va], y[va]
    mu = Xtr.mean(0)
    sd = Xtr.std(0)
    sd[sd < 1e-8] = 1.0
    out = {
        "X_train": ((Xtr - mu) / sd).astype(np.float32),
        "X_val": ((Xva - mu) / sd).astype(np.float32),
        "X_test": ((X_test - mu) / sd).astype(np.float32),
    }
    if task == "clf":
        out.update(y_train=ytr.astype(np.int64), y_val=yva.astype(np.int64), y_test=y_test.astype(np.int64))
    else:
        ym, ys = float(ytr.mean()), float(ytr.std())
        out.update(y_train=((ytr - ym) / ys).astype(np.float32), y_val=((yva - ym) / ys).astype(np.float32),
                   y_test=((y_test - ym) / ys).astype(np.float32), y_mean=np.float64(ym), y_std=np.float64(ys))
    return out


def preprocess(name: str, raw_dir: Path, out_path: Path, opts: dict | None = None) -> Path:
    """Deterministically turn the raw form into one .npz (see module docstring)."""
    raw_dir, out_path = Path(raw_dir), Path(out_path)
    opts = dict(opts or {})
    task = DATASETS[name]["task"]
    relevant = np.zeros(0, np.int64)
    X_test = y_test = None
    if name == "fashion":
        Xa = read_idx(raw_dir / "train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
        ya = read_idx(raw_dir / "train-labels-idx1-ubyte.gz").astype(np.int64)
        Xb = read_idx(raw_dir / "t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
        yb = read_idx(raw_dir / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
        rng = np.random.default_rng([int(_opt(opts, "data_seed")), 777])
        ia = _subsample(len(ya), opts.get("n_train", DEFAULT_OPTS["n_train"]), rng)
        ib = _subsample(len(yb), opts.get("n_test", DEFAULT_OPTS["n_test"]), rng)
        X, y, X_test, y_test = Xa[ia], ya[ia], Xb[ib], yb[ib]
    else:
        with np.load(raw_dir / f"{name}.npz") as z:
            X, y = z["X"], z["y"]
            if "X_test" in z:
                X_test, y_test = z["X_test"], z["y_test"]
            if "relevant" in z:
                relevant = z["relevant"].astype(np.int64)
        # optional subsampling (smoke): n_train caps the pool before splitting
        if opts.get("n_train") is not None:
            rng = np.random.default_rng([int(_opt(opts, "data_seed")), 777])
            ia = _subsample(len(y), opts["n_train"], rng)
            X, y = X[ia], y[ia]
            if X_test is not None and opts.get("n_test") is not None:
                ib = _subsample(len(y_test), opts["n_test"], rng)
                X_test, y_test = X_test[ib], y_test[ib]
    arrays = split_and_scale(name, X, y, X_test, y_test, opts, task)
    arrays["relevant"] = relevant
    return _save_npz(out_path, **arrays)


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# --------------------------------------------------------------------------------------
# Full-scale sources (the paper's real datasets).  Downloading is wired in core.
# sha256 is None where it could not be verified offline (k values are the paper defaults to
# be checked by the caller); md5 given where officially published (MNIST md5s as in torchvision).
# --------------------------------------------------------------------------------------
FULL_SOURCES: dict[str, dict[str, Any]] = {
    "mnist": {  # yann.lecun.com is unreliable; torchvision's mirror serves identical files
        "task": "clf", "k": 50, "format": "idx",
        "files": {
            "train-images-idx3-ubyte.gz": {"url": "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz",
                                           "md5": "f68b3c2dcbeaaa9fbdd348bbdeb94873", "sha256": None},
            "train-labels-idx1-ubyte.gz": {"url": "https://ossci-datasets.s3.amazonaws.com/mnist/train-labels-idx1-ubyte.gz",
                                           "md5": "d53e105ee54ea40749a09fcbcd1e9432", "sha256": None},
            "t10k-images-idx3-ubyte.gz": {"url": "https://ossci-datasets.s3.amazonaws.com/mnist/t10k-images-idx3-ubyte.gz",
                                          "md5": "9fb629c4189551a2d022fa330f9573f3", "sha256": None},
            "t10k-labels-idx1-ubyte.gz": {"url": "https://ossci-datasets.s3.amazonaws.com/mnist/t10k-labels-idx1-ubyte.gz",
                                          "md5": "ec29112dd5afa0611ce80d1b7f02629c", "sha256": None},
        },
    },
    "fashion": {
        "task": "clf", "k": 50, "format": "idx",
        "files": {f: {"url": f"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/{f}", "md5": m, "sha256": None}
                  for f, m in FASHION_MD5.items()},
    },
    "isolet": {  # UCI id 54; zip holds isolet1+2+3+4.data(.Z) and isolet5.data(.Z)
        "task": "clf", "k": 50, "format": "uci_isolet",
        "files": {"isolet.zip": {"url": "https://archive.ics.uci.edu/static/public/54/isolet.zip", "md5": None, "sha256": None}},
    },
    "coil20": {  # Columbia CAVE, processed 128x128 images obj{1..20}__{0..71}.png
        "task": "clf", "k": 50, "format": "coil20",
        "files": {"coil-20-proc.zip": {"url": "https://www.cs.columbia.edu/CAVE/databases/SLAM_coil-20_coil-100/coil-20/coil-20-proc.zip",
                                       "md5": None, "sha256": None}},
    },
    "activity": {  # UCI HAR (id 240)
        "task": "clf", "k": 50, "format": "uci_har",
        "files": {"har.zip": {"url": "https://archive.ics.uci.edu/static/public/240/human+activity+recognition+using+smartphones.zip",
                              "md5": None, "sha256": None}},
    },
    "mice": {  # UCI Mice Protein Expression (id 342), Data_Cortex_Nuclear.xls (needs xlrd)
        "task": "clf", "k": 50, "format": "uci_mice",
        "files": {"mice.zip": {"url": "https://archive.ics.uci.edu/static/public/342/mice+protein+expression.zip",
                               "md5": None, "sha256": None}},
    },
    "madelon": {  # UCI Madelon (id 171): MADELON/madelon_{train,valid}.{data,labels}
        "task": "clf", "k": 20, "format": "uci_madelon",
        "files": {"madelon.zip": {"url": "https://archive.ics.uci.edu/static/public/171/madelon.zip", "md5": None, "sha256": None}},
    },
    "california_housing": {  # the StatLib file sklearn uses; sha256 copied from sklearn.datasets._california_housing
        "task": "reg", "k": 3, "format": "cal_housing",
        "files": {"cal_housing.tgz": {"url": "https://ndownloader.figshare.com/files/5976036", "md5": None,
                                      "sha256": "aaa5c9a6afe2225cc2aed2723682ae403280c4a3695a2ddda4ffb5d8215ea681"}},
    },
}


def _zip_member(zf: zipfile.ZipFile, suffix: str) -> bytes:
    for n in zf.namelist():
        if n.endswith(suffix):
            return zf.read(n)
    raise FileNotFoundError(f"no member ending in {suffix!r}")


def load_full(name: str, raw_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Parse a full-scale raw dataset into (X, y, X_test, y_test); test parts None if no official split.

    Accepts the downloaded archives named in FULL_SOURCES or, for the text formats, already
    extracted files (e.g. ``madelon_train.data`` next to ``madelon_train.labels``).
    """
    raw_dir = Path(raw_dir)
    fmt = FULL_SOURCES[name]["format"]
    if fmt == "idx":
        X = read_idx(raw_dir / "train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
        y = read_idx(raw_dir / "train-labels-idx1-ubyte.gz").astype(np.int64)
        Xt = read_idx(raw_dir / "t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
        yt = read_idx(raw_dir / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
        return X, y, Xt, yt
    if fmt == "uci_madelon":
        # labels of the official valid split are public; the official test labels are not.
        if (raw_dir / "madelon_train.data").exists():
            X, y = read_uci_madelon(raw_dir / "madelon_train.data", raw_dir / "madelon_train.labels")
            vd, vl = raw_dir / "madelon_valid.data", raw_dir / "madelon_valid.labels"
            if vd.exists() and vl.exists():
                Xt, yt = read_uci_madelon(vd, vl)
                return X.astype(np.float32), y, Xt.astype(np.float32), yt
            return X.astype(np.float32), y, None, None
        with zipfile.ZipFile(raw_dir / "madelon.zip") as zf:
            parts = {}
            for split in ("train", "valid"):
                try:
                    d = np.loadtxt(io.BytesIO(_zip_member(zf, f"madelon_{split}.data")), ndmin=2)
                    lab = np.loadtxt(io.BytesIO(_zip_member(zf, f"madelon_{split}.labels")), dtype=np.int64, ndmin=1)
                    parts[split] = (d.astype(np.float32), (lab > 0).astype(np.int64))
                except FileNotFoundError:
                    parts[split] = (None, None)
        return (*parts["train"], *parts["valid"])
    if fmt == "cal_housing":
        with tarfile.open(raw_dir / "cal_housing.tgz") as tf:
            member = next(m for m in tf.getmembers() if m.name.endswith("cal_housing.data"))
            a = np.loadtxt(tf.extractfile(member), delimiter=",")
        # columns: lon, lat, housingMedianAge, totalRooms, totalBedrooms, population, households,
        # medianIncome, medianHouseValue -> same derived features as sklearn
        a = a[:, [8, 7, 2, 3, 4, 5, 6, 1, 0]]
        y = a[:, 0] / 100000.0
        X = a[:, 1:].copy()
        X[:, 2] /= X[:, 5]
        X[:, 3] /= X[:, 5]
        X[:, 5] = X[:, 4] / X[:, 5]
        return X.astype(np.float32), y.astype(np.float32), None, None
    if fmt == "uci_isolet":
        def _read(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
            a = np.loadtxt(io.BytesIO(blob), delimiter=",", ndmin=2)
            return a[:, :-1].astype(np.float32), a[:, -1].astype(np.int64) - 1
        with zipfile.ZipFile(raw_dir / "isolet.zip") as zf:
            names = zf.namelist()
            def blob(stem):
                n = next(m for m in names if Path(m).name.startswith(stem))
                b = zf.read(n)
                if n.endswith(".Z"):
                    raise ValueError(f"{n}: unix-compress (.Z) member; decompress with `uncompress` first")
                return b
            X, y = _read(blob("isolet1+2+3+4"))
            Xt, yt = _read(blob("isolet5"))
        return X, y, Xt, yt
    if fmt == "uci_har":
        with zipfile.ZipFile(raw_dir / "har.zip") as zf:
            inner = [n for n in zf.namelist() if n.endswith(".zip")]
            if inner:  # newer UCI archives wrap the dataset zip inside another zip
                zf = zipfile.ZipFile(io.BytesIO(zf.read(inner[0])))
            X = np.loadtxt(io.BytesIO(_zip_member(zf, "train/X_train.txt")), dtype=np.float32)
            y = np.loadtxt(io.BytesIO(_zip_member(zf, "train/y_train.txt")), dtype=np.int64) - 1
            Xt = np.loadtxt(io.BytesIO(_zip_member(zf, "test/X_test.txt")), dtype=np.float32)
            yt = np.loadtxt(io.BytesIO(_zip_member(zf, "test/y_test.txt")), dtype=np.int64) - 1
        return X, y, Xt, yt
    if fmt == "coil20":
        # 20 objects x 72 poses of 128x128 grey PNGs (obj{i}__{pose}.png); the feature-selection
        # literature (and the paper) uses them downsampled to 32x32 = 1024 features.
        from PIL import Image

        X, y = [], []
        with zipfile.ZipFile(raw_dir / "coil-20-proc.zip") as zf:
            for n in sorted(zf.namelist()):
                stem = Path(n).name
                if not (stem.startswith("obj") and stem.endswith(".png")):
                    continue
                img = Image.open(io.BytesIO(zf.read(n))).convert("L").resize((32, 32), Image.BILINEAR)
                X.append(np.asarray(img, np.float32).ravel() / 255.0)
                y.append(int(stem[3:].split("__")[0]) - 1)
        return np.stack(X), np.asarray(y, np.int64), None, None
    if fmt == "uci_mice":
        # Data_Cortex_Nuclear.xls: 77 protein expression columns, class in the last column; missing
        # values filled with the column mean (as is usual for this set).
        import pandas as pd

        with zipfile.ZipFile(raw_dir / "mice.zip") as zf:
            blob = _zip_member(zf, "Data_Cortex_Nuclear.xls")
        try:
            df = pd.read_excel(io.BytesIO(blob))
        except ImportError as exc:
            raise ImportError("reading Mice Protein (.xls) needs `pip install xlrd`") from exc
        feats = df.columns[1:78]
        X = df[feats].astype(np.float64)
        X = X.fillna(X.mean()).to_numpy(np.float32)
        y = pd.Categorical(df["class"]).codes.astype(np.int64)
        return X, y, None, None
    raise NotImplementedError(f"load_full: format {fmt!r} ({name}) not implemented")


def preprocess_full(name: str, raw_dir: Path, out_path: Path, opts: dict | None = None) -> Path:
    """Full scale: parse the downloaded files, split (official test split where there is one) and standardise."""
    X, y, X_test, y_test = load_full(name, Path(raw_dir))
    arrays = split_and_scale(name, X, y, X_test, y_test, dict(opts or {}), FULL_SOURCES[name]["task"])
    arrays["relevant"] = np.zeros(0, np.int64)
    return _save_npz(Path(out_path), **arrays)
