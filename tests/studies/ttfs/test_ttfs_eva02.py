"""EVA-02 at full scale: our `eva02.Eva02` against timm's own EVA code, through the full-scale loader.

timm cannot be imported beside our CPU torch as installed (it imports torchvision at import time, and PyPI's
torchvision is a CUDA build), so the test installs timm==1.0.31 without dependencies into a temporary
folder and imports it with a stand-in `torchvision` (placeholder names only: EVA's forward never touches
torchvision). A tiny random EVA-02 of each of timm's two layouts (Ti/S: fused qkv + packed SwiGLU; B/L:
separate q/k/v + SwiGLU with sub-LayerNorm) is saved as safetensors, served over HTTP, fetched by the
download stage, mapped by fit_base and loaded by the method stages; its logits must equal timm's forward,
and the TTFS conversion at exact timing must reproduce them. Without network the timm tests skip; the
offline tests below check the key mapping on a stand-in with timm's key names and RoPE's defining property.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import subprocess
import sys
import types

import pytest
import torch

from icml25.core.errors import UserError
from icml25.studies.ttfs import eva02, full, study
from icml25.studies.ttfs.naive import NaiveTTFSViT
from icml25.studies.ttfs.snn import TTFSViT

TIMM = "timm==1.0.31"
CLIP_MEAN, CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
LAYOUTS = {  # timm constructor options of eva02_small_* / eva02_base_* and _large_ (ours: sub_ln)
    "S": ({}, False),
    "B/L": ({"qkv_fused": False, "scale_mlp": True}, True),
}
SPEC = {"arch": "eva02", "dim": 32, "depth": 2, "heads": 2, "mlp_dim": int(32 * 4 * 2 / 3), "rope_ref_grid": 3,
        "mean": CLIP_MEAN, "std": CLIP_STD}


class _Placeholder(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(name, (), {})


class _StubTorchvision(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any `torchvision[.x]` import gets an empty package whose names are placeholder classes."""

    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []

        def attr(n):
            if n.startswith("__"):
                raise AttributeError(n)
            return _Placeholder(n, (), {})

        m.__getattr__ = attr
        return m

    def exec_module(self, module):
        pass


@pytest.fixture(scope="module")
def timm_eva(tmp_path_factory):
    target = tmp_path_factory.mktemp("timm")
    try:
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                            TIMM], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip install {TIMM} timed out (offline?): the comparison with timm cannot run")
    if r.returncode != 0:
        pytest.skip(f"pip install {TIMM} failed (offline?): {r.stderr.strip()[-300:]}")
    finder = _StubTorchvision()
    if any(k == "torchvision" or k.startswith("torchvision.") for k in sys.modules):
        pytest.skip("a real torchvision is already imported: the stand-in cannot be used")
    sys.meta_path.insert(0, finder)
    sys.path.insert(0, str(target))
    try:
        import timm.models.eva as eva
        yield eva
    finally:
        sys.meta_path.remove(finder)
        sys.path.remove(str(target))
        for k in [k for k in sys.modules if k.split(".")[0] in ("timm", "torchvision")]:
            del sys.modules[k]


def _random_timm_eva(eva, layout: str):
    opts, _ = LAYOUTS[layout]
    torch.manual_seed(0)
    m = eva.Eva(img_size=28, patch_size=7, embed_dim=32, depth=2, num_heads=2, mlp_ratio=4 * 2 / 3, swiglu_mlp=True,
                use_rot_pos_emb=True, ref_feat_shape=(3, 3), num_classes=10, **opts).eval()
    with torch.no_grad():  # timm zero-inits the biases and shrinks the head: every weight random instead
        for p in m.parameters():
            p.normal_(0.0, 0.2)
    return m


def _normalise(x):
    return (x - torch.tensor(CLIP_MEAN)[:, None, None]) / torch.tensor(CLIP_STD)[:, None, None]


def _through_full_path(tmp_path, file_server, state_dict, sub_ln: bool):
    """Serve a timm-format state dict, then download -> fit_base -> load_model (the full-scale path)."""
    from safetensors.torch import save_file

    served = tmp_path / "hub"
    served.mkdir()
    save_file({k: v.contiguous() for k, v in state_dict.items()}, str(served / "model.safetensors"))
    root = tmp_path / "repo"
    raw, base = root / "data" / "raw" / "full" / "ttfs", root / "results" / "full" / "ttfs" / "base"
    raw.mkdir(parents=True)
    base.mkdir(parents=True)
    cfg = {"study": "ttfs", "scale": "full", "seeds": [0], "data_seed": 0,
           "datasets": {"imagenet": {"root": str(tmp_path), "image": 28, "patch": 7, "channels": 3, "classes": 10}},
           "models": {"eva": {**SPEC, "sub_ln": sub_ln, "timm": "tiny_eva02",
                              "url": file_server(served) + "/model.safetensors"}}}
    full.download(cfg, raw)
    study.fit_base(cfg, root / "data" / "processed" / "full" / "ttfs", base)
    return study.load_model(cfg, "imagenet", "eva", 0, base)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_eva02_checkpoint_matches_timm_and_converts_exactly(tmp_path, file_server, timm_eva, layout):
    ref = _random_timm_eva(timm_eva, layout)
    ours = _through_full_path(tmp_path, file_server, ref.state_dict(), LAYOUTS[layout][1])
    assert isinstance(ours, eva02.Eva02)
    x = torch.rand(8, 3, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = ref(_normalise(x))   # timm feeds CLIP-normalised pixels; ours has that folded in
        got = ours(x)
    assert want.abs().max() > 0.3   # logits that carry signal, not a near-zero head
    assert torch.allclose(got, want, atol=1e-5, rtol=0), float((got - want).abs().max())
    # the TTFS SNN at exact timing reproduces the model's logits (calibrated on these images: nothing clips)
    snn = TTFSViT(ours)
    snn.calibrate(x)
    out = snn.run(x, None)
    assert torch.allclose(out, got.double(), atol=1e-5, rtol=0), float((out - got.double()).abs().max())
    assert snn.run(x, 8).sub(got.double()).abs().max() > 1e-3   # finite timing really is coarser
    # the naive baseline runs on EVA-02 too (its numbers are not expected to match)
    nv = NaiveTTFSViT(ours)
    nv.calibrate(x)
    assert torch.isfinite(nv.run(x, None)).all()


def _as_timm_keys(model: eva02.Eva02, sub_ln: bool) -> dict:
    """Our EVA-02 written with timm's key names (the Ti/S layout without sub-LN, else the B/L one), the
    CLIP normalisation un-folded: what a timm checkpoint of the same network holds."""
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    d, c, p = model.patch_embed.out_features, model.channels, model.patch
    std = torch.tensor(CLIP_STD).reshape(1, -1, 1, 1)
    mean = torch.tensor(CLIP_MEAN).reshape(1, -1, 1, 1)
    w = sd.pop("patch_embed.weight").reshape(d, c, p, p) * std
    out = {"patch_embed.proj.weight": w, "patch_embed.proj.bias": sd.pop("patch_embed.bias") + (w / std * mean).sum((1, 2, 3))}
    for k in ("cls_token", "pos_embed", "fc_norm.weight", "fc_norm.bias", "head.weight", "head.bias"):
        out[k] = sd.pop(k)
    for i in range(len(model.blocks)):
        b = f"blocks.{i}"
        for k in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "mlp.fc2.weight", "mlp.fc2.bias"):
            out[f"{b}.{k}"] = sd.pop(f"{b}.{k}")
        out[f"{b}.attn.proj.weight"], out[f"{b}.attn.proj.bias"] = sd.pop(f"{b}.attn.out_proj.weight"), sd.pop(f"{b}.attn.out_proj.bias")
        W = sd.pop(f"{b}.attn.in_proj_weight")
        qb, vb = sd.pop(f"{b}.attn.q_bias"), sd.pop(f"{b}.attn.v_bias")
        g = (sd.pop(f"{b}.mlp.gate.weight"), sd.pop(f"{b}.mlp.gate.bias"))
        u = (sd.pop(f"{b}.mlp.up.weight"), sd.pop(f"{b}.mlp.up.bias"))
        if not sub_ln:
            out.update({f"{b}.attn.qkv.weight": W, f"{b}.attn.q_bias": qb, f"{b}.attn.v_bias": vb,
                        f"{b}.mlp.fc1.weight": torch.cat([g[0], u[0]]), f"{b}.mlp.fc1.bias": torch.cat([g[1], u[1]])})
        else:
            q, k, v = W.chunk(3)
            out.update({f"{b}.attn.q_proj.weight": q, f"{b}.attn.q_proj.bias": qb, f"{b}.attn.k_proj.weight": k,
                        f"{b}.attn.v_proj.weight": v, f"{b}.attn.v_proj.bias": vb,
                        f"{b}.mlp.fc1_g.weight": g[0], f"{b}.mlp.fc1_g.bias": g[1], f"{b}.mlp.fc1_x.weight": u[0],
                        f"{b}.mlp.fc1_x.bias": u[1], f"{b}.mlp.norm.weight": sd.pop(f"{b}.mlp.norm.weight"),
                        f"{b}.mlp.norm.bias": sd.pop(f"{b}.mlp.norm.bias")})
    assert not sd, sorted(sd)   # every parameter of ours has a timm name
    return out


@pytest.mark.parametrize("sub_ln", [False, True])
def test_eva02_key_mapping_on_a_timm_named_stand_in(sub_ln):
    torch.manual_seed(0)
    src = eva02.build({**SPEC, "patch": 7, "sub_ln": sub_ln}, 28, 3, 10).eval()
    with torch.no_grad():
        for p in src.parameters():
            p.normal_(0.0, 0.2)
    timm_sd = _as_timm_keys(src, sub_ln)
    dst = eva02.build({**SPEC, "patch": 7, "sub_ln": sub_ln}, 28, 3, 10).eval()
    dst.load_state_dict(full.timm_eva02_to_ours(timm_sd, CLIP_MEAN, CLIP_STD))   # strict: every key, every shape
    x = torch.rand(4, 3, 28, 28)
    with torch.no_grad():
        assert torch.allclose(dst(x), src(x), atol=1e-5, rtol=0)
    # a key our model does not build (a k bias, which EVA-02 has not) is refused, not silently dropped
    bad = dict(timm_sd)
    bad["blocks.0.attn.k_bias" if not sub_ln else "blocks.0.attn.k_proj.bias"] = torch.zeros(32)
    with pytest.raises(UserError, match="does not build"):
        full.timm_eva02_to_ours(bad, CLIP_MEAN, CLIP_STD)


def test_rope_leaves_the_class_token_and_is_relative():
    """RoPE's defining property: after rotation q_n . k_m depends only on the offset m - n (here: the same
    grid shift), the class token (prefix) is not rotated, and each pair keeps its length."""
    grid, hd = 4, 8
    sin, cos = eva02.rope_tables(grid, 3, hd)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(hd, generator=g), torch.randn(hd, generator=g)
    n = grid * grid
    Q = eva02.apply_rope(q.expand(1 + n, hd).clone(), sin, cos)
    K = eva02.apply_rope(k.expand(1 + n, hd).clone(), sin, cos)
    assert torch.equal(Q[0], q) and torch.equal(K[0], k)
    pos = lambda r, c: 1 + r * grid + c
    base = float(Q[pos(0, 0)] @ K[pos(1, 2)])
    assert abs(float(Q[pos(2, 1)] @ K[pos(3, 3)]) - base) < 1e-5      # the same offset (1, 2)
    assert abs(float(Q[pos(0, 0)] @ K[pos(2, 1)]) - base) > 1e-3      # another offset differs
    pairs = lambda v: v.unflatten(-1, (-1, 2)).norm(dim=-1)
    assert torch.allclose(pairs(Q[1:]), pairs(q).expand(n, -1), atol=1e-6)
