"""The full-scale loaders on tiny local stand-ins, through the same code path: a timm-format ViT checkpoint
(safetensors) served over HTTP, fetched by the download stage, mapped onto our ViT by fit_base (with timm's
input normalisation folded in) and loaded by the method stages; an ImageNet-style folder of images."""
from __future__ import annotations

import numpy as np
import torch

from icml25.studies.ttfs import full, study, vit


def _timm_state_dict(model: vit.ViT) -> dict:
    """Our tiny ViT written with timm's VisionTransformer key names (what timm's checkpoints hold)."""
    sd, out = model.state_dict(), {}
    d, c, p = model.patch_embed.out_features, model.channels, model.patch
    out["patch_embed.proj.weight"] = sd["patch_embed.weight"].reshape(d, c, p, p).clone()
    out["patch_embed.proj.bias"] = sd["patch_embed.bias"].clone()
    for k in ("cls_token", "pos_embed", "norm.weight", "norm.bias", "head.weight", "head.bias"):
        out[k] = sd[k].clone()
    for i in range(len(model.blocks)):
        b = f"blocks.{i}"
        for src, dst in (("attn.in_proj_weight", "attn.qkv.weight"), ("attn.in_proj_bias", "attn.qkv.bias"),
                         ("attn.out_proj.weight", "attn.proj.weight"), ("attn.out_proj.bias", "attn.proj.bias")):
            out[f"{b}.{dst}"] = sd[f"{b}.{src}"].clone()
        for k in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias",
                  "mlp.fc2.weight", "mlp.fc2.bias"):
            out[f"{b}.{k}"] = sd[f"{b}.{k}"].clone()
    return out


def test_timm_checkpoint_download_map_and_load(tmp_path, file_server):
    from safetensors.torch import save_file

    torch.manual_seed(0)
    spec = {"dim": 16, "depth": 2, "heads": 2, "mlp_dim": 32, "mlp": "gelu"}
    ref = vit.build({**spec, "patch": 4}, 16, 3, 7).eval()
    served = tmp_path / "hub"
    served.mkdir()
    save_file(_timm_state_dict(ref), str(served / "model.safetensors"))
    url = file_server(served) + "/model.safetensors"
    root = tmp_path / "repo"
    raw = root / "data" / "raw" / "full" / "ttfs"
    base = root / "results" / "full" / "ttfs" / "base"
    raw.mkdir(parents=True)
    base.mkdir(parents=True)
    cfg = {"study": "ttfs", "scale": "full", "seeds": [0], "data_seed": 0,
           "datasets": {"imagenet": {"root": str(tmp_path), "image": 16, "patch": 4, "channels": 3, "classes": 7}},
           "models": {"tiny": {**spec, "timm": "tiny_vit", "url": url}}}
    full.download(cfg, raw)
    assert full.checkpoint_file(raw, "tiny").exists()
    study.fit_base(cfg, root / "data" / "processed" / "full" / "ttfs", base)
    ours = study.load_model(cfg, "imagenet", "tiny", 0, base)
    x = torch.rand(5, 3, 16, 16)
    with torch.no_grad():
        # timm feeds (x - 0.5) / 0.5; ours takes pixels in [0, 1] with that map folded into the patch embedding
        assert torch.allclose(ours(x), ref((x - 0.5) / 0.5), atol=1e-5)


def test_imagenet_folder_loader(tmp_path):
    from PIL import Image

    root = tmp_path / "val"
    rng = np.random.default_rng(0)
    for wnid in ("n01440764", "n01443537"):
        (root / wnid).mkdir(parents=True)
        for j in range(2):
            Image.fromarray(rng.integers(0, 255, (40, 30, 3), dtype=np.uint8)).save(root / wnid / f"im{j}.png")
    tx, ty, vx, vy = full.imagenet_val(None, {"root": str(root), "image": 16, "calib_images": 3})
    assert vx.shape == (4, 3, 16, 16) and vx.dtype == np.uint8
    assert list(vy) == [0, 0, 1, 1] and len(tx) == 3
