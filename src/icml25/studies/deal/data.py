"""Images: scikit-image / scikit-learn bundled images at mini and smoke (offline), the DnCNN repository's
Train400 / BSD68 / Set12 PNGs at full scale (downloaded file by file), and DRUNet's pretrained weights where
the scale runs that baseline.

A split is a list of image specs `{name, source}`: source `skimage` (skimage.data.<name>), `sklearn`
(load_sample_images: china / flower) or `url` (a PNG fetched to raw/<split>/<file>). Everything becomes
gray float32 in [0, 1] (ITU-R 601 luma, skimage.color.rgb2gray, for colour images).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25.core.errors import UserError


def to_gray(im) -> np.ndarray:
    im = np.asarray(im)
    if im.dtype == bool:
        im = im.astype(np.float32)
    elif np.issubdtype(im.dtype, np.integer):
        im = im.astype(np.float32) / 255.0
    if im.ndim == 3:
        from skimage.color import rgb2gray

        im = rgb2gray(im[..., :3])
    return np.asarray(im, dtype=np.float32)


def url_files(spec: dict) -> list[tuple[str, str]]:
    """(url, file name) of a url split: `base` + `files`, or `base` + `pattern` over `range`."""
    base = spec["base"].rstrip("/")
    files = spec.get("files") or [spec["pattern"].format(i) for i in range(spec["range"][0], spec["range"][1] + 1)]
    return [(f"{base}/{f}", f) for f in files]


def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    for split, spec in cfg["data"]["splits"].items():
        if spec["source"] == "url":
            for url, name in url_files(spec):
                fetch(url, raw_dir / split / name, None)
    if "drunet" in cfg.get("methods", ()):  # the DRUNet baseline's pretrained weights (full scale)
        from .drunet import fetch_weights

        fetch_weights(cfg, raw_dir)


def load_split(spec: dict, raw_dir: Path, split: str) -> list[tuple[str, np.ndarray]]:
    src = spec["source"]
    if src == "skimage":
        import skimage.data

        out = []
        for name in spec["names"]:
            if not hasattr(skimage.data, name):
                raise UserError(f"deal: skimage.data has no image '{name}'")
            out.append((name, to_gray(getattr(skimage.data, name)())))
        return out
    if src == "sklearn":
        from sklearn.datasets import load_sample_images

        imgs = load_sample_images()
        names = [Path(f).stem for f in imgs.filenames]
        missing = [n for n in spec["names"] if n not in names]
        if missing:
            raise UserError(f"deal: sklearn sample images are {names}, not {missing}")
        return [(n, to_gray(imgs.images[names.index(n)])) for n in spec["names"]]
    if src == "url":
        from PIL import Image

        out = []
        for _, name in url_files(spec):
            path = raw_dir / split / name
            if not path.exists():
                raise UserError(f"deal: missing {path}; run the download stage")
            out.append((Path(name).stem, to_gray(np.asarray(Image.open(path)))))
        return out
    raise UserError(f"deal: unknown image source '{src}' (skimage, sklearn or url)")


def random_patches(images: list[np.ndarray], size: int, per_image: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for im in images:
        h, w = im.shape
        if h < size or w < size:
            raise UserError(f"deal: a training image of {h}x{w} is smaller than the {size}px patch")
        ys = rng.integers(0, h - size + 1, per_image)
        xs = rng.integers(0, w - size + 1, per_image)
        out += [im[y:y + size, x:x + size] for y, x in zip(ys, xs)]
    return np.stack(out).astype(np.float32)


def centre_crop(im: np.ndarray, size: int | None) -> np.ndarray:
    if not size:
        return im
    h, w = im.shape
    s = min(size, h, w)
    y, x = (h - s) // 2, (w - s) // 2
    return im[y:y + s, x:x + s]


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    from icml25.core.io import write_json

    d = cfg["data"]
    splits = {k: load_split(v, raw_dir, k) for k, v in d["splits"].items()}
    train = [im for k in d["train_splits"] for _, im in splits[k]]
    if not train:
        raise UserError("deal: no training images")
    patches = random_patches(train, int(d["patch"]), int(d["patches_per_image"]), int(d["seed"]))
    np.save(out_dir / "train_patches.npy", patches)
    test = [(n, centre_crop(im, d.get("test_crop"))) for k in d["test_splits"] for n, im in splits[k]]
    val = [(n, centre_crop(im, d.get("val_crop"))) for n, im in splits[d["val_split"]]][:1]
    # deblurring has its own test set where the paper uses one (Set12 at full); else the denoising test images
    deblur = [(n, centre_crop(im, d.get("test_crop"))) for k in d.get("deblur_splits") or d["test_splits"]
              for n, im in splits[k]]
    np.savez(out_dir / "test.npz", **{n: im for n, im in test})
    np.savez(out_dir / "deblur.npz", **{n: im for n, im in deblur})
    np.savez(out_dir / "val.npz", **{n: im for n, im in val})
    if "drunet" in cfg.get("methods", ()):
        from .drunet import stage_weights

        stage_weights(cfg, raw_dir, out_dir)
    write_json(out_dir / "images.json", {"train_patches": list(patches.shape), "test": [n for n, _ in test],
                                         "deblur": [n for n, _ in deblur], "val": [n for n, _ in val]})


def load_images(path: Path) -> list[tuple[str, np.ndarray]]:
    with np.load(path) as z:
        return [(k, z[k].astype(np.float32)) for k in z.files]


def noisy(im: np.ndarray, sigma255: float, seed: int, index: int) -> np.ndarray:
    """The test noise of one (seed, sigma, image): the same for every method, so methods pair by seed."""
    rng = np.random.default_rng([int(seed), int(round(sigma255 * 100)), int(index)])
    return (im + (sigma255 / 255.0) * rng.standard_normal(im.shape)).astype(np.float32)
