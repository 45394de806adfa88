"""Full scale: timm ImageNet checkpoints (downloaded from the Hugging Face hub, mapped onto `vit.ViT`, or
`eva02.Eva02` for EVA-02, key for key) and the ImageNet-1k validation images (a local ImageFolder tree: the
images are licence-gated).

timm's ViT-S/B/L-16 augreg models normalise inputs with mean = std = 0.5; that affine map is folded into
the patch embedding so the converted network's input spikes still code pixels in [0, 1]; EVA-02's per-channel
CLIP mean / std (given on the model in the config) likewise.
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
                raise UserError(f"checkpoint lacks {p}.{src}: not a timm ViT (for an EVA-02 checkpoint set "
                                "arch: eva02 on the model)")
            out[f"{p}.{dst}"] = sd[f"{p}.{src}"]
    return {k: torch.as_tensor(v).float() for k, v in out.items()}


def _fold_input_norm(w, b, mean, std):
    """A patch-embedding conv (d, c, p, p) fed (x - mean_c) / std_c -> a Linear fed pixels x in [0, 1]."""
    import torch

    mean = torch.as_tensor(mean, dtype=w.dtype).reshape(-1, 1, 1).expand(w.shape[1:])
    std = torch.as_tensor(std, dtype=w.dtype).reshape(-1, 1, 1).expand(w.shape[1:])
    W = (w / std).reshape(w.shape[0], -1)
    return W, b - (W * mean.reshape(1, -1)).sum(1)


def timm_eva02_to_ours(sd: dict, mean, std) -> dict:
    """A timm EVA-02 classifier state dict (`eva.Eva`, global_pool='avg') -> `eva02.Eva02`'s, with the
    input normalisation (per channel) folded in. Both of timm's layouts are read: fused `attn.qkv` with
    `q_bias` / `v_bias` and the packed SwiGLU `mlp.fc1` (gate first: gate_last=False) of EVA-02 Ti/S, and
    separate `q_proj` / `k_proj` / `v_proj` with `mlp.fc1_g` / `fc1_x` / `norm` (sub-LN) of EVA-02 B/L.
    Every checkpoint key must be used: a key we do not map (layer scale, a k bias, an attention norm)
    means a model we do not build, and is refused rather than dropped."""
    import torch

    sd = {k: torch.as_tensor(v).float() for k, v in sd.items()}
    used, out = set(), {}

    def take(k):
        if k not in sd:
            raise UserError(f"checkpoint lacks {k}: not a timm EVA-02 classifier")
        used.add(k)
        return sd[k]

    out["patch_embed.weight"], out["patch_embed.bias"] = _fold_input_norm(
        take("patch_embed.proj.weight"), take("patch_embed.proj.bias"), mean, std)
    for k in ("cls_token", "pos_embed", "fc_norm.weight", "fc_norm.bias", "head.weight", "head.bias"):
        out[k] = take(k)
    depth = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks."))
    for i in range(depth):
        p = f"blocks.{i}"
        for k in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "mlp.fc2.weight", "mlp.fc2.bias"):
            out[f"{p}.{k}"] = take(f"{p}.{k}")
        out[f"{p}.attn.out_proj.weight"], out[f"{p}.attn.out_proj.bias"] = take(f"{p}.attn.proj.weight"), \
            take(f"{p}.attn.proj.bias")
        if f"{p}.attn.qkv.weight" in sd:
            out[f"{p}.attn.in_proj_weight"] = take(f"{p}.attn.qkv.weight")
            out[f"{p}.attn.q_bias"], out[f"{p}.attn.v_bias"] = take(f"{p}.attn.q_bias"), take(f"{p}.attn.v_bias")
        else:
            out[f"{p}.attn.in_proj_weight"] = torch.cat([take(f"{p}.attn.{n}_proj.weight") for n in "qkv"])
            out[f"{p}.attn.q_bias"], out[f"{p}.attn.v_bias"] = take(f"{p}.attn.q_proj.bias"), \
                take(f"{p}.attn.v_proj.bias")
        if f"{p}.mlp.fc1.weight" in sd:
            w, b = take(f"{p}.mlp.fc1.weight"), take(f"{p}.mlp.fc1.bias")
            h = w.shape[0] // 2
            out[f"{p}.mlp.gate.weight"], out[f"{p}.mlp.up.weight"] = w[:h], w[h:]
            out[f"{p}.mlp.gate.bias"], out[f"{p}.mlp.up.bias"] = b[:h], b[h:]
        else:
            for src, dst in (("fc1_g", "gate"), ("fc1_x", "up"), ("norm", "norm")):
                for t in ("weight", "bias"):
                    out[f"{p}.mlp.{dst}.{t}"] = take(f"{p}.mlp.{src}.{t}")
    left = sorted(set(sd) - used)
    if left:
        raise UserError(f"EVA-02 checkpoint has keys our model does not build: {left[:5]}")
    return {k: v.contiguous() for k, v in out.items()}


def prepare_base(cfg: dict, models: list, out_dir: Path) -> None:
    """Map every downloaded timm checkpoint to our ViT and save it as the ANN of every seed (no training)."""
    import torch
    from safetensors.torch import load_file

    raw_dir = Path(out_dir).parents[3] / "data" / "raw" / cfg["scale"] / cfg["study"]
    for name in models:
        f = checkpoint_file(raw_dir, name)
        if not f.exists():
            raise UserError(f"missing checkpoint {f}: run the download stage first")
        spec = cfg["models"][name]
        if spec.get("arch", "vit") == "eva02":
            sd = timm_eva02_to_ours(load_file(str(f)), spec["mean"], spec["std"])
        else:
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
