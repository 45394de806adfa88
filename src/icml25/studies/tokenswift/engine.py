"""A lean Llama/Qwen2 decoder with explicit KV tensors, loaded from HF safetensors.

The same loader reads the tiny model the mini scale trains (`save_pretrained`) and a sharded
`meta-llama/Llama-3.1-8B` / `Qwen/Qwen2.5-*` checkpoint (a `model.safetensors.index.json`). Nothing here
uses HF `generate` or its cache classes (their internals changed in transformers 5): keys and values are
plain tensors [kv_heads, length, head_dim] per layer, and every forward says which keys it attends to.

`forward(tokens, positions, keys, values, mask)` returns the last layer's hidden state *before* the final
norm (what the TokenSwift heads read) and the new tokens' keys/values; `logits(h)` applies norm + lm_head.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F


def _load_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    path = Path(path)
    index = path / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out: dict[str, torch.Tensor] = {}
    for f in files:
        out.update(load_file(str(path / f)))
    return out


def rope_inv_freq(config) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention scaling of the checkpoint's RoPE (default, llama3, yarn, ...),
    computed by transformers' own RoPE initialisers so scaled variants follow the reference exactly."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = getattr(config, "rope_parameters", None) or {"rope_type": "default",
                                                          "rope_theta": getattr(config, "rope_theta", 10000.0)}
    kind = params.get("rope_type", "default")
    if kind == "default":
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        inv = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        return inv.float(), 1.0
    inv, scale = ROPE_INIT_FUNCTIONS[kind](config, None)
    return inv.float(), float(scale)


class Engine:
    """Inference-only decoder. Weights in float32 on CPU (mini) or the config's dtype/device (full)."""

    def __init__(self, tensors: dict, config, dtype=torch.float32, device="cpu"):
        self.config = config
        self.L = config.num_hidden_layers
        self.nh = config.num_attention_heads
        self.kvh = config.num_key_value_heads
        self.hd = getattr(config, "head_dim", None) or config.hidden_size // self.nh
        self.eps = float(config.rms_norm_eps)
        self.dtype, self.device = dtype, torch.device(device)
        g = lambda k: tensors[k].to(device=self.device, dtype=dtype)  # noqa: E731
        opt = lambda k: g(k) if k in tensors else None  # noqa: E731
        self.embed = g("model.embed_tokens.weight")
        self.lm_head = g("lm_head.weight") if "lm_head.weight" in tensors else self.embed
        self.norm = g("model.norm.weight")
        self.layers = []
        for i in range(self.L):
            p = f"model.layers.{i}."
            self.layers.append({
                "ln1": g(p + "input_layernorm.weight"), "ln2": g(p + "post_attention_layernorm.weight"),
                "q": g(p + "self_attn.q_proj.weight"), "k": g(p + "self_attn.k_proj.weight"),
                "v": g(p + "self_attn.v_proj.weight"), "o": g(p + "self_attn.o_proj.weight"),
                "qb": opt(p + "self_attn.q_proj.bias"), "kb": opt(p + "self_attn.k_proj.bias"),
                "vb": opt(p + "self_attn.v_proj.bias"),
                "gate": g(p + "mlp.gate_proj.weight"), "up": g(p + "mlp.up_proj.weight"),
                "down": g(p + "mlp.down_proj.weight"),
            })
        inv, self.attn_scale = rope_inv_freq(config)
        self.inv_freq = inv.to(self.device)
        self.extra = {k: v for k, v in tensors.items() if not k.startswith(("model.layers.", "model.embed",
                                                                            "model.norm", "lm_head"))}

    @classmethod
    def from_pretrained(cls, path, dtype=torch.float32, device="cpu") -> "Engine":
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(path))
        return cls(_load_tensors(Path(path)), config, dtype, device)

    # ---- pieces ---------------------------------------------------------------------------------
    def rms(self, x, w):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * xf.to(x.dtype)

    def _rope(self, x, positions):
        # x [heads, T, d]; HF's rotate-half convention
        f = positions.to(self.device, torch.float32)[:, None] * self.inv_freq[None, :]
        emb = torch.cat([f, f], dim=-1)
        cos, sin = (emb.cos() * self.attn_scale).to(x.dtype), (emb.sin() * self.attn_scale).to(x.dtype)
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def logits(self, h):
        """Original head: final norm + lm_head on the pre-norm hidden state."""
        return (self.rms(h, self.norm) @ self.lm_head.T).float()

    def qkv(self, i, x, positions):
        """Queries [nh, T, d] and keys/values [kvh, T, d] of layer i for hidden x [T, H] (roped)."""
        lw = self.layers[i]
        hn = self.rms(x, lw["ln1"])
        q, k, v = hn @ lw["q"].T, hn @ lw["k"].T, hn @ lw["v"].T
        if lw["qb"] is not None:
            q, k, v = q + lw["qb"], k + lw["kb"], v + lw["vb"]
        T = x.shape[0]
        q = q.view(T, self.nh, self.hd).transpose(0, 1)
        k = k.view(T, self.kvh, self.hd).transpose(0, 1)
        v = v.view(T, self.kvh, self.hd).transpose(0, 1)
        return self._rope(q, positions), self._rope(k, positions), v

    def attend(self, q, K, V, mask):
        """q [nh, T, d], K/V [kvh, S, d] (already including the new tokens), mask [T, S] bool (True = see)."""
        g = self.nh // self.kvh
        T, S = q.shape[1], K.shape[1]
        qg = q.reshape(self.kvh, g * T, self.hd)
        s = (qg @ K.transpose(1, 2)) / math.sqrt(self.hd)  # [kvh, g*T, S]
        s = s.view(self.kvh, g, T, S)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s.float(), dim=-1).to(V.dtype).view(self.kvh, g * T, S)
        return (p @ V).view(self.nh, T, self.hd)

    def mlp_out(self, i, x, a):
        lw = self.layers[i]
        T = x.shape[0]
        x = x + a.transpose(0, 1).reshape(T, self.nh * self.hd) @ lw["o"].T
        hn = self.rms(x, lw["ln2"])
        return x + (F.silu(hn @ lw["gate"].T) * (hn @ lw["up"].T)) @ lw["down"].T

    # ---- forwards -------------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, tokens, positions, past_k=None, past_v=None, mask=None, key_fn=None):
        """tokens/positions [T]; past_k/past_v: per layer [kvh, S, d] (or None); mask [T, S+T] bool or None
        (None: causal among the new tokens, all past visible). key_fn(i, q, k, v) -> (K, V, mask) lets the
        caller choose the attended keys per layer (the partial KV cache). Returns (h [T, H], ks, vs)."""
        tokens = torch.as_tensor(tokens, device=self.device)
        positions = torch.as_tensor(positions, device=self.device)
        T = tokens.shape[0]
        x = self.embed[tokens]
        ks, vs = [], []
        for i in range(self.L):
            q, k, v = self.qkv(i, x, positions)
            ks.append(k)
            vs.append(v)
            if key_fn is not None:
                K, V, m = key_fn(i, q, k, v)
            else:
                if past_k is not None and past_k[i].shape[1] > 0:
                    K, V = torch.cat([past_k[i], k], 1), torch.cat([past_v[i], v], 1)
                else:
                    K, V = k, v
                S = K.shape[1] - T
                if mask is None:
                    m = torch.ones(T, S + T, dtype=torch.bool, device=self.device)
                    m[:, S:] = torch.tril(m[:, S:])
                else:
                    m = mask
            x = self.mlp_out(i, x, self.attend(q, K, V, m))
        return x, ks, vs


class KVCache:
    """The full KV cache: preallocated [kvh, capacity, d] per layer and a length n."""

    def __init__(self, engine: Engine, capacity: int):
        shape = (engine.kvh, int(capacity), engine.hd)
        self.k = [torch.zeros(shape, dtype=engine.dtype, device=engine.device) for _ in range(engine.L)]
        self.v = [torch.zeros(shape, dtype=engine.dtype, device=engine.device) for _ in range(engine.L)]
        self.n = 0

    def view(self):
        return [k[:, : self.n] for k in self.k], [v[:, : self.n] for v in self.v]

    def append(self, ks, vs, rows=None):
        """Commit the new tokens' keys/values (rows: which of them, in order)."""
        for i in range(len(self.k)):
            k, v = (ks[i], vs[i]) if rows is None else (ks[i][:, rows], vs[i][:, rows])
            t = k.shape[1]
            self.k[i][:, self.n:self.n + t] = k
            self.v[i][:, self.n:self.n + t] = v
        self.n += (ks[0].shape[1] if rows is None else len(rows))


def load_heads(engine: Engine, path: Path | None, n_heads: int):
    """TokenSwift heads from a safetensors file we trained, or from keys a released checkpoint carries
    (`model.medusa_layers.{k}.*`, the official naming)."""
    from .heads import MultiTokenHeads

    heads = MultiTokenHeads(engine.config.hidden_size, n_heads, engine.eps)
    if path is not None and Path(path).exists():
        from safetensors.torch import load_file

        heads.load_state_dict(load_file(str(path)))
    else:
        pre = "model.medusa_layers."
        sd = {k[len(pre):].replace("linear", "linear"): v for k, v in engine.extra.items() if k.startswith(pre)}
        if not sd:
            raise FileNotFoundError(f"no heads at {path} and none in the checkpoint")
        heads.load_from_official(sd)
    return heads.to(device=engine.device, dtype=engine.dtype).eval()
