"""Images: scikit-image / scikit-learn bundled images at mini and smoke (offline), the DnCNN repository's
Train400 / BSD68 / Set12 PNGs at full scale (downloaded file by file), and DRUNet's / WCRR-NN's pretrained
weights where the scale runs those baselines.

A split is a list of image specs `{name, source}`: source `skimage` (skimage.data.<name>), `sklearn`
(load_sample_images: china / flower), `url` (a PNG fetched to raw/<split>/<file>) or `archive` (the images
of a tar archive whose member paths match `members`: BSDS500 for colour training). An image named in a test
split is never used for validation, and neither is ever a training image (a no-op where the splits are
disjoint anyway; it makes BSDS500 minus CBSD68, i.e. CBSD432, the colour training set). Everything becomes float32 in [0, 1]: gray (h, w) (ITU-R 601 luma,
skimage.color.rgb2gray, for colour images), or colour (3, h, w) where `data.color` is set.
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


def to_rgb(im) -> np.ndarray:
    """A colour image as (3, h, w) float32 in [0, 1] (channels first, as the models take it)."""
    im = np.asarray(im)
    if im.ndim != 3 or im.shape[-1] < 3:
        raise UserError(f"deal: a colour split holds an image of shape {im.shape}, not (h, w, 3)")
    im = im[..., :3].astype(np.float32) / (255.0 if np.issubdtype(im.dtype, np.integer) else 1.0)
    return np.ascontiguousarray(np.moveaxis(im, -1, 0))


def url_files(spec: dict) -> list[tuple[str, str]]:
    """(url, file name) of a url split: `base` + `files`, or `base` + `pattern` over `range`."""
    base = spec["base"].rstrip("/")
    files = spec.get("files") or [spec["pattern"].format(i) for i in range(spec["range"][0], spec["range"][1] + 1)]
    return [(f"{base}/{f}", f) for f in files]


def used_splits(d: dict) -> list[str]:
    """The splits a scale reads (a variant may leave some of its base scale's splits unused)."""
    names = list(d["train_splits"]) + list(d["test_splits"]) + [d["val_split"]] + list(d.get("deblur_splits") or [])
    return [k for k in d["splits"] if k in names]


def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    for split in used_splits(cfg["data"]):
        spec = cfg["data"]["splits"][split]
        if spec["source"] == "url":
            for url, name in url_files(spec):
                fetch(url, raw_dir / split / name, None)
        elif spec["source"] == "archive":
            fetch(spec["url"], raw_dir / "archives" / spec["file"], spec.get("sha256"))
    from . import goujon_data

    if goujon_data.enabled(cfg):  # the paper's CT / MRI data (full scale): Goujon et al.'s Zenodo record
        goujon_data.download(cfg, raw_dir)
    if "drunet" in cfg.get("methods", ()):  # the DRUNet baseline's pretrained weights (full scale)
        from .drunet import fetch_weights

        fetch_weights(cfg, raw_dir)
    if "wcrr" in cfg.get("methods", ()) and (cfg.get("wcrr") or {}).get("url"):  # WCRR-NN's official checkpoint
        from .drunet import fetch_weights

        fetch_weights(cfg, raw_dir, "wcrr")


def archive_images(spec: dict, raw_dir: Path) -> list[tuple[str, np.ndarray]]:
    """(stem, image array) of the archive members matching `members`, sorted by path."""
    import fnmatch
    import tarfile

    from PIL import Image

    path = raw_dir / "archives" / spec["file"]
    if not path.exists():
        raise UserError(f"deal: missing {path}; run the download stage")
    out = []
    with tarfile.open(path) as tar:
        for m in sorted((m for m in tar.getmembers() if m.isfile() and fnmatch.fnmatch(m.name, spec["members"])),
                        key=lambda m: m.name):
            with tar.extractfile(m) as f:
                out.append((Path(m.name).stem, np.asarray(Image.open(f).convert("RGB"))))
    if not out:
        raise UserError(f"deal: no member of {path.name} matches '{spec['members']}'")
    return out


def load_split(spec: dict, raw_dir: Path, split: str, color: bool = False) -> list[tuple[str, np.ndarray]]:
    conv = to_rgb if color else to_gray
    src = spec["source"]
    if src == "archive":
        return [(n, conv(im)) for n, im in archive_images(spec, raw_dir)]
    if src == "skimage":
        import skimage.data

        out = []
        for name in spec["names"]:
            if not hasattr(skimage.data, name):
                raise UserError(f"deal: skimage.data has no image '{name}'")
            out.append((name, conv(getattr(skimage.data, name)())))
        return out
    if src == "sklearn":
        from sklearn.datasets import load_sample_images

        imgs = load_sample_images()
        names = [Path(f).stem for f in imgs.filenames]
        missing = [n for n in spec["names"] if n not in names]
        if missing:
            raise UserError(f"deal: sklearn sample images are {names}, not {missing}")
        return [(n, conv(imgs.images[names.index(n)])) for n in spec["names"]]
    if src == "url":
        from PIL import Image

        out = []
        for _, name in url_files(spec):
            path = raw_dir / split / name
            if not path.exists():
                raise UserError(f"deal: missing {path}; run the download stage")
            out.append((Path(name).stem, conv(np.asarray(Image.open(path)))))
        return out
    raise UserError(f"deal: unknown image source '{src}' (skimage, sklearn, url or archive)")


def random_patches(images: list[np.ndarray], size: int, per_image: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for im in images:
        h, w = im.shape[-2:]
        if h < size or w < size:
            raise UserError(f"deal: a training image of {h}x{w} is smaller than the {size}px patch")
        ys = rng.integers(0, h - size + 1, per_image)
        xs = rng.integers(0, w - size + 1, per_image)
        out += [im[..., y:y + size, x:x + size] for y, x in zip(ys, xs)]
    return np.stack(out).astype(np.float32)


def centre_crop(im: np.ndarray, size: int | None) -> np.ndarray:
    if not size:
        return im
    h, w = im.shape[-2:]
    s = min(size, h, w)
    y, x = (h - s) // 2, (w - s) // 2
    return im[..., y:y + s, x:x + s]


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    from icml25.core.io import write_json

    d = cfg["data"]
    splits = {k: load_split(d["splits"][k], raw_dir, k, bool(d.get("color"))) for k in used_splits(d)}
    deblur_splits = d.get("deblur_splits") or d["test_splits"]
    held = {n for k in list(d["test_splits"]) + list(deblur_splits) for n, _ in splits[k]}
    val = [(n, centre_crop(im, d.get("val_crop"))) for n, im in splits[d["val_split"]] if n not in held][:1]
    if not val:
        raise UserError(f"deal: the validation split '{d['val_split']}' has no image outside the test splits")
    held |= {n for n, _ in val}
    train = [im for k in d["train_splits"] for n, im in splits[k] if n not in held]
    if not train:
        raise UserError("deal: no training images")
    patches = random_patches(train, int(d["patch"]), int(d["patches_per_image"]), int(d["seed"]))
    np.save(out_dir / "train_patches.npy", patches)
    test = [(n, centre_crop(im, d.get("test_crop"))) for k in d["test_splits"] for n, im in splits[k]]
    # deblurring has its own test set where the paper uses one (Set12 at full); else the denoising test images
    deblur = [(n, centre_crop(im, d.get("test_crop"))) for k in deblur_splits for n, im in splits[k]]
    np.savez(out_dir / "test.npz", **{n: im for n, im in test})
    np.savez(out_dir / "deblur.npz", **{n: im for n, im in deblur})
    np.savez(out_dir / "val.npz", **{n: im for n, im in val})
    inv = cfg.get("inverse") or {}
    inverse = []
    from . import goujon_data

    if goujon_data.enabled(cfg):  # the paper's CT / MRI data: the official validation / test cases
        inverse = goujon_data.preprocess(cfg, raw_dir, out_dir)
    elif inv.get("enabled"):  # CT / MRI: square centre crops of the deblurring images (+ the Shepp-Logan phantom)
        n = int(inv["size"])
        inverse = [(k, centre_crop(im, n)) for k, im in deblur]
        if inv.get("phantom"):
            inverse.insert(0, ("shepp_logan_phantom", phantom(n)))
        np.savez(out_dir / "inverse.npz", **{k: im for k, im in inverse})
    if "drunet" in cfg.get("methods", ()):
        from .drunet import stage_weights

        stage_weights(cfg, raw_dir, out_dir)
    if "wcrr" in cfg.get("methods", ()) and (cfg.get("wcrr") or {}).get("url"):
        from .drunet import stage_weights
        from .wcrr import WEIGHTS

        stage_weights(cfg, raw_dir, out_dir, "wcrr", WEIGHTS)
    write_json(out_dir / "images.json", {"train_patches": list(patches.shape), "test": [n for n, _ in test],
                                         "deblur": [n for n, _ in deblur], "val": [n for n, _ in val],
                                         "inverse": [n if isinstance(n, str) else n[0] for n in inverse]})


def phantom(n: int) -> np.ndarray:
    """scikit-image's 400x400 Shepp-Logan phantom resized to n x n (anti-aliased), in [0, 1]."""
    import skimage.data
    from skimage.transform import resize

    im = resize(skimage.data.shepp_logan_phantom(), (n, n), anti_aliasing=True)
    return np.clip(im, 0, 1).astype(np.float32)


def load_images(path: Path) -> list[tuple[str, np.ndarray]]:
    with np.load(path) as z:
        return [(k, z[k].astype(np.float32)) for k in z.files]


def noisy(im: np.ndarray, sigma255: float, seed: int, index: int) -> np.ndarray:
    """The test noise of one (seed, sigma, image): the same for every method, so methods pair by seed."""
    rng = np.random.default_rng([int(seed), int(round(sigma255 * 100)), int(index)])
    return (im + (sigma255 / 255.0) * rng.standard_normal(im.shape)).astype(np.float32)
