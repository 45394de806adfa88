"""Data: the training images of the mini pixel DDPM (smoke, mini) and the prompts of the full scale.

Smoke/mini: the RGB and grey images bundled in scikit-image's wheel (no pooch downloads) and scikit-learn's
two sample images, rescaled so the short side is `short_side` px, then random `crop` x `crop` crops with
horizontal flips. Full: the prompts of Gustavosta/Stable-Diffusion-Prompts (the official generation set),
one parquet file through icml25.core.download.fetch.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

# bundled in the scikit-image 0.26 wheel (OFFLINE_DATA.md); grey ones are repeated over RGB
SKIMAGE_RGB = ["astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "retina",
               "colorwheel"]
SKIMAGE_GREY = ["brick", "camera", "coins", "grass", "gravel", "moon", "page", "text"]
PROMPTS_REPO = "Gustavosta/Stable-Diffusion-Prompts"
# the Hub's parquet conversion of the dataset's test split (the split the official tr_utils reads)
PROMPTS_URL = ("https://huggingface.co/datasets/Gustavosta/Stable-Diffusion-Prompts/resolve/"
               "refs%2Fconvert%2Fparquet/default/test/0000.parquet")


def bundled_images(names: list[str] | None = None) -> dict[str, np.ndarray]:
    """name -> uint8 RGB array, from the installed scikit-image and scikit-learn only."""
    import skimage.data
    from sklearn.datasets import load_sample_images

    out = {}
    for n in SKIMAGE_RGB + SKIMAGE_GREY:
        if names is not None and n not in names:
            continue
        img = np.asarray(getattr(skimage.data, n)())
        if img.ndim == 2:
            img = np.repeat(img[..., None], 3, axis=2)
        out[n] = img[..., :3].astype(np.uint8)
    sk = load_sample_images()
    for fname, img in zip(sk.filenames, sk.images):
        n = Path(fname).stem
        if names is None or n in names:
            out[n] = np.asarray(img, dtype=np.uint8)
    if names is not None and set(names) - set(out):
        raise UserError(f"gaussmarker: unknown bundled image(s) {sorted(set(names) - set(out))}; "
                        f"known: {', '.join(SKIMAGE_RGB + SKIMAGE_GREY + ['china', 'flower'])}")
    return out


def rescale(img: np.ndarray, short_side: int) -> np.ndarray:
    from PIL import Image

    h, w = img.shape[:2]
    s = short_side / min(h, w)
    return np.asarray(Image.fromarray(img).resize((max(short_side, round(w * s)), max(short_side, round(h * s))),
                                                  Image.BICUBIC))


def crops(images: list[np.ndarray], n: int, size: int, seed: int) -> np.ndarray:
    """n random size x size crops (uniform over images, then position), half of them flipped left-right."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, size, size, 3), dtype=np.uint8)
    for i in range(n):
        img = images[rng.integers(len(images))]
        y, x = rng.integers(0, img.shape[0] - size + 1), rng.integers(0, img.shape[1] - size + 1)
        c = img[y:y + size, x:x + size]
        out[i] = c[:, ::-1] if rng.random() < 0.5 else c
    return out


def download(cfg: dict, raw_dir: Path) -> None:
    d = cfg["data"]
    if cfg["scale"] != "full":
        imgs = bundled_images(d.get("images"))
        np.savez_compressed(raw_dir / "images.npz", **imgs)
        return
    from icml25.core.download import fetch

    fetch(d.get("prompts_url", PROMPTS_URL), raw_dir / "prompts.parquet", d.get("prompts_sha256"))


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    d = cfg["data"]
    if cfg["scale"] != "full":
        with np.load(raw_dir / "images.npz") as z:
            imgs = [rescale(z[k], int(d["short_side"])) for k in sorted(z.files)]
        c = crops(imgs, int(d["n_crops"]), int(d["crop"]), int(d["data_seed"]))
        np.savez_compressed(out_dir / "crops.npz", crops=c)
        (out_dir / "data.json").write_text(json.dumps({"n_crops": len(c), "crop": int(d["crop"]),
                                                       "images": len(imgs)}))
        return
    import pandas as pd

    try:
        frame = pd.read_parquet(raw_dir / "prompts.parquet")
    except Exception as exc:  # a truncated or non-parquet download
        raise UserError(f"gaussmarker: cannot read {raw_dir / 'prompts.parquet'} as parquet ({exc}); "
                        "delete it and rerun the download stage") from None
    if "Prompt" not in frame.columns:
        raise UserError(f"gaussmarker: the prompts file has no 'Prompt' column (columns: {list(frame.columns)})")
    need = int(d["n_prompts"])
    prompts = [str(p) for p in frame["Prompt"].tolist()]
    if len(prompts) < need:
        raise UserError(f"gaussmarker: {len(prompts)} prompts in {PROMPTS_REPO}, the config asks for {need}")
    (out_dir / "prompts.json").write_text(json.dumps(prompts[:need]))
    (out_dir / "data.json").write_text(json.dumps({"n_prompts": need, "source": PROMPTS_REPO}))
