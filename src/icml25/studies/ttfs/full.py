"""Full scale: timm ImageNet checkpoints (downloaded from the Hugging Face hub, mapped onto `vit.ViT` key for
key) and the ImageNet-1k validation images (a local ImageFolder tree: the images are licence-gated).

timm's ViT-S/B/L-16 augreg models normalise inputs with mean = std = 0.5; that affine map is folded into
the patch embedding so the converted network's input spikes still code pixels in [0, 1].
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

HF_URL = "https://huggingface.co/timm/{id}/resolve/main/model.safetensors"
IMAGE_EXT = (".jpeg", ".jpg", ".png")


def checkpoint_file(raw_dir: Path, model: str) -> Path:
    return Path(raw_dir) / f"{model}.safetensors"


def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    for name, spec in cfg["models"].items():
        if "timm" in spec:
            url = spec.get("url") or HF_URL.format(id=spec["timm"])
            # the hub publishes no checksum for these files: the data manifest records their digests
            fetch(url, checkpoint_file(raw_dir, name), spec.get("sha256"))
    im = cfg["datasets"].get("imagenet")
    if im is not None:
        root = Path(im.get("root", "data/imagenet/val"))
        if not root.is_dir():
            raise UserError(f"ImageNet validation images not found at {root}: ImageNet is licence-gated; put the "
                            "50k validation images in class folders (the usual val/ layout, wnid folders sorted = "
                            "class index) and set datasets.imagenet.root")


def timm_to_ours(sd: dict, mean: float = 0.5, std: float = 0.5) -> dict:
    """A timm VisionTransformer state dict -> `vit.ViT`'s, with the input normalisation folded in."""
    import torch

    out = {}
    w = sd["patch_embed.proj.weight"]
    W = w.reshape(w.shape[0], -1) / std                     # (x - mean)/std = x/std - mean/std
    out["patch_embed.weight"] = W
    out["patch_embed.bias"] = sd["patch_embed.proj.bias"] - (W * mean).sum(1)
    for k in ("cls_token", "pos_embed", "norm.weight", "norm.bias", "head.weight", "head.bias"):
        out[k] = sd[k]
    depth = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks."))
    for i in range(depth):
        p = f"blocks.{i}"
        ren = {"norm1.weight": "norm1.weight", "norm1.bias": "norm1.bias", "norm2.weight": "norm2.weight",
               "norm2.bias": "norm2.bias", "attn.qkv.weight": "attn.in_proj_weight",
               "attn.qkv.bias": "attn.in_proj_bias", "attn.proj.weight": "attn.out_proj.weight",
               "attn.proj.bias": "attn.out_proj.bias", "mlp.fc1.weight": "mlp.fc1.weight",
               "mlp.fc1.bias": "mlp.fc1.bias", "mlp.fc2.weight": "mlp.fc2.weight", "mlp.fc2.bias": "mlp.fc2.bias"}
        for src, dst in ren.items():
            if f"{p}.{src}" not in sd:
                raise UserError(f"checkpoint lacks {p}.{src}: not a timm ViT (EVA-02 checkpoints are not supported)")
            out[f"{p}.{dst}"] = sd[f"{p}.{src}"]
    return {k: torch.as_tensor(v).float() for k, v in out.items()}


def prepare_base(cfg: dict, models: list, out_dir: Path) -> None:
    """Map every downloaded timm checkpoint to our ViT and save it as the ANN of every seed (no training)."""
    import torch
    from safetensors.torch import load_file

    raw_dir = Path(out_dir).parents[3] / "data" / "raw" / cfg["scale"] / cfg["study"]
    for name in models:
        f = checkpoint_file(raw_dir, name)
        if not f.exists():
            raise UserError(f"missing checkpoint {f}: run the download stage first")
        sd = timm_to_ours(load_file(str(f)))
        for ds in cfg["datasets"]:
            for s in cfg["seeds"]:
                torch.save(sd, Path(out_dir) / f"{ds}_{name}_seed{s}.pt")


def imagenet_val(raw_dir, spec: dict):
    """(train_x, train_y, test_x, test_y) from an ImageFolder tree: resize the short side to
    size/0.875 (bicubic), centre crop `image` (timm's eval transform); calibration images are the first
    `calib_images` of a seeded permutation of the same folder (no training split is needed)."""
    from PIL import Image

    root = Path(spec.get("root", "data/imagenet/val"))
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    if not classes:
        raise UserError(f"no class folders in {root}")
    size = int(spec.get("image", 224))
    resize = int(round(size / float(spec.get("crop_pct", 0.875))))
    files = [(f, i) for i, c in enumerate(classes) for f in sorted((root / c).iterdir())
             if f.suffix.lower() in IMAGE_EXT]
    n = spec.get("n_test")
    files = files if n is None else files[: int(n)]
    xs = np.empty((len(files), 3, size, size), np.uint8)
    for j, (f, _) in enumerate(files):
        im = Image.open(f).convert("RGB")
        w, h = im.size
        s = resize / min(w, h)
        im = im.resize((max(size, round(w * s)), max(size, round(h * s))), Image.BICUBIC)
        w, h = im.size
        left, top = (w - size) // 2, (h - size) // 2
        xs[j] = np.asarray(im.crop((left, top, left + size, top + size))).transpose(2, 0, 1)
    ys = np.array([i for _, i in files], np.int64)
    perm = np.random.default_rng(0).permutation(len(xs))[: int(spec.get("calib_images", 1024))]
    return xs[perm], ys[perm], xs, ys
