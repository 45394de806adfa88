"""TTFSFormer conversion (Alg. 1, our reading): every operator of the ViT / EVA-like / EVA-02 model as TTFS
neurons.

Every tensor between two operators is a `Spikes` group (one spike time per neuron); every operator is a
receiving stage with static weights (an affine map of its inputs' PSPs) followed by an emitting stage that
emits a monotone F of the membrane potential:
* Linear: F = identity (the bias and the input floors folded into the bias);
* GELU / SiLU: two monotone pieces (split at the function's minimum), merged by +1 weights downstream;
* products (QK^T, AV, the LayerNorm scale, the SwiGLU gate): the quarter-square identity
  ab = ((a+b)^2 - (a-b)^2)/4, each square as two monotone pieces (v>0, v<0);
* softmax: e = exp(s - m) (m: the calibrated max), L = log(sum_j e), y = exp(s - m - L);
* LayerNorm: centring (affine), squares, 1/sqrt(mean + eps), the product with 1/sqrt, gamma/beta (affine);
* residual additions: a receiving stage with inputs from two earlier groups (spikes delayed to its window);
* EVA-02 (eva02.py): RoPE folded into the q/k neurons' weights per position, the SwiGLU sub-LayerNorm as
  LayerNorm neurons, the patch-token average as mean neurons before fc_norm.
The classifier's logits are the head neurons' membrane potentials (read out, not re-encoded).

Intervals [a, b] are per neuron (our reading of "[a, b] is set such that nearly all outputs lie within the
range") and come from a calibration pass on training images (`calibrate`): each neuron's observed range
over the calibration images, widened by `margin` of its width, the floor kept where F has one. SOPs are counted at
every receiving stage: each input spike adds one synaptic event per postsynaptic neuron it reaches.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Optional

import torch

from . import neurons as N
from .vit import Mlp, ViT


def _t(v) -> torch.Tensor:
    return torch.as_tensor(v, dtype=torch.float64)


def _lift(v, heads, like) -> torch.Tensor:
    """A group's interval bound (per neuron without the batch axis, or a scalar) shaped like its values
    `like` after `heads` (which expects a batch axis)."""
    v = _t(v)
    return heads(v[None]) if v.dim() >= 2 else v.expand(like.shape)


class TTFSViT:
    """A ViT/EVA-like model (`vit.ViT`) converted into a TTFS SNN; `run(x, p)` simulates it in closed form."""

    def __init__(self, model: ViT, margin: float = 0.1):
        self.m = model.eval()
        self.margin = float(margin)
        self.ranges: dict[str, tuple[float, float]] = {}   # group -> (a, b)
        self.consts: dict[str, float] = {}                  # softmax max m per attention layer
        self._obs: dict[str, list] = {}
        self._calib = False
        self.p: Optional[int] = None
        self.reset_stats()
        sd = {k: v.detach().to(torch.float64) for k, v in model.state_dict().items()}
        self.w = sd
        self.d = model.patch_embed.out_features
        self.heads = model.blocks[0].attn.num_heads

    # ---- bookkeeping ---------------------------------------------------------------------------------
    def reset_stats(self):
        self.stats = defaultdict(lambda: {"neurons": 0, "spikes": 0})
        self.sops = 0
        self.fanout: dict[str, int] = {}   # group -> synapses per neuron (summed over its receivers)
        self.nonspiking_macs = 0

    def _syn(self, s: N.Spikes, name: str, per_neuron: int) -> None:
        """A receiving stage reads group `name`: each of its spikes drives `per_neuron` synapses."""
        if self._calib:
            return
        self.sops += int(s.spiked.sum()) * per_neuron
        self._fan[name] = self._fan.get(name, 0) + per_neuron

    def _emit(self, name: str, V: torch.Tensor, fn: N.Fn, interval=None) -> N.Spikes:
        """Emitting stage of group `name`. `interval`: (a, b) derived from the inputs' intervals (product
        pieces), used instead of a calibrated one."""
        if interval is not None:
            a, b = interval
            s = N.emit(V, fn, a, b, None if self._calib else self.p)
            if not self._calib:
                st = self.stats[name]
                st["neurons"] += s.t.numel()
                st["spikes"] += int(s.spiked.sum())
            return s
        if self._calib:
            y = fn.f(V)
            lo, hi = y.amin(0), y.amax(0)   # per neuron, over the batch
            o = self._obs.get(name)
            if o is None:
                self._obs[name] = [lo, hi, fn.floor]
            else:
                o[0], o[1] = torch.minimum(o[0], lo), torch.maximum(o[1], hi)
            return N.Spikes(N.encode(y, y.min(), y.max() + 1e-12, None), y.min(), y.max() + 1e-12)
        a, b = self.ranges[name]
        s = N.emit(V, fn, a, b, self.p)
        st = self.stats[name]
        st["neurons"] += s.t.numel()
        st["spikes"] += int(s.spiked.sum())
        return s

    def _finish_calibration(self):
        for name, (lo, hi, floor) in self._obs.items():
            # widen by `margin` of the larger of the neuron's own and its group's mean calibrated width: a
            # neuron that barely varied on the calibration images still gets room for the test images
            width = torch.maximum(hi - lo, (hi - lo).mean())
            a = torch.full_like(lo, floor) if floor is not None else lo - self.margin * width
            b = hi + self.margin * width
            self.ranges[name] = (a, torch.maximum(b, a + 1e-6))

    @torch.no_grad()
    def calibrate(self, x: torch.Tensor, batch: int = 128) -> None:
        """Two passes over calibration images: the softmax constants m first, then every group's interval."""
        self._calib, self._obs, self._m_obs = True, {}, {}
        for phase in ("m", "ranges"):
            self._phase = phase
            self._obs = {}
            for i in range(0, len(x), batch):
                self._forward(x[i:i + batch].to(torch.float64))
            if phase == "m":
                self.consts = {k: hi + self.margin * (hi - lo) for k, (lo, hi) in self._m_obs.items()}
        self._calib = False
        self._finish_calibration()

    @torch.no_grad()
    def run(self, x: torch.Tensor, p: Optional[int], batch: int = 128) -> torch.Tensor:
        """Logits of the SNN at timing resolution p (None = exact); stats accumulate over batches."""
        if not self.ranges:
            raise RuntimeError("calibrate() the converted network first")
        self.p = p
        out = [self._forward(x[i:i + batch].to(torch.float64)) for i in range(0, len(x), batch)]
        return torch.cat(out)

    # ---- operators -----------------------------------------------------------------------------------
    def _linear_V(self, s: N.Spikes, name: str, W: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """Receiving stage of a dense layer: PSPs through W, floors and bias folded into one constant."""
        self._syn(s, name, W.shape[0])
        floor = torch.as_tensor(s.a, dtype=W.dtype).expand(s.t.shape[1:])
        return s.psp() @ W.T + (floor @ W.T + bias)

    def _square_pieces(self, name: str, V: torch.Tensor, bounds=None):
        """x^2 as two monotone pieces. `bounds`: (lo, hi) that V cannot leave (from its inputs' intervals);
        the pieces' intervals are then [0, hi^2] and [0, lo^2], so they never clip."""
        if bounds is None:
            return [self._emit(f"{name}.{fn.name}", V, fn) for fn in N.SQUARE]
        lo, hi = bounds
        tiny = 1e-12
        up = (0.0, torch.clamp(torch.as_tensor(hi, dtype=V.dtype), min=0) ** 2 + tiny)
        down = (0.0, torch.clamp(torch.as_tensor(lo, dtype=V.dtype), max=0) ** 2 + tiny)
        return [self._emit(f"{name}.{fn.name}", V, fn, iv) for fn, iv in zip(N.SQUARE, (up, down))]

    def _product(self, name: str, A, B):
        """Quarter-square neurons for a*b: receive a+b and a-b, emit their squares' pieces. A, B: (value,
        a, b), the factor and its interval (broadcast like the value). Returns the pieces and their weights
        (+1/4 for (a+b)^2, -1/4 for (a-b)^2) for the receiving stage downstream."""
        (av, aa, ab), (bv, ba, bb) = A, B
        plus = self._square_pieces(f"{name}.sum", av + bv, (aa + ba, ab + bb))
        minus = self._square_pieces(f"{name}.dif", av - bv, (aa - bb, ab - ba))
        return [(s, 0.25, f"{name}.sum.{fn.name}") for s, fn in zip(plus, N.SQUARE)] + \
               [(s, -0.25, f"{name}.dif.{fn.name}") for s, fn in zip(minus, N.SQUARE)]

    def _layernorm(self, name: str, x: N.Spikes, xname: str, gamma, beta, eps: float) -> N.Spikes:
        d = x.t.shape[-1]
        # the mean neuron: one per token, receives its d inputs (fan-out 1 per input spike)
        self._syn(x, xname, 1)
        mu = self._emit(f"{name}.mu", x.value().mean(-1, keepdim=True), N.IDENTITY)
        # centring neurons and both square pieces receive x_k (3 synapses) and the mean (3d synapses)
        self._syn(x, xname, 3)
        self._syn(mu, f"{name}.mu", 3 * d)
        Vc = x.value() - mu.value()
        c = self._emit(f"{name}.c", Vc, N.IDENTITY)
        sq = self._square_pieces(f"{name}.sq", Vc, (_t(x.a) - _t(mu.b), _t(x.b) - _t(mu.a)))
        Vv = sum(s.value() for s in sq).mean(-1, keepdim=True) + eps
        for s, fn in zip(sq, N.SQUARE):
            self._syn(s, f"{name}.sq.{fn.name}", 1)
        r = self._emit(f"{name}.r", Vv, N.RSQRT)
        # c_k * r by quarter squares: c_k reaches the 4 pieces of its pair; r reaches the 4 pieces of all d
        self._syn(c, f"{name}.c", 4)
        self._syn(r, f"{name}.r", 4 * d)
        parts = self._product(f"{name}.cr", (c.value(), _t(c.a), _t(c.b)), (r.value(), _t(r.a), _t(r.b)))
        Vy = beta.clone().expand_as(Vc).clone()
        for s, wgt, pname in parts:
            self._syn(s, pname, 1)
            Vy = Vy + gamma * wgt * s.value()
        return self._emit(f"{name}.y", Vy, N.IDENTITY)

    def _attention(self, name: str, y: N.Spikes, yname: str, x: N.Spikes, xname: str, pre: str) -> N.Spikes:
        """Multi-head self-attention of LN output y, plus the residual x, as one spiking block."""
        w, d, h = self.w, self.d, self.heads
        hd = d // h
        B, T, _ = y.t.shape
        W_in, b_in = w[f"{pre}.attn.in_proj_weight"].clone(), self._qkv_bias(pre).clone()
        W_in[:d] /= math.sqrt(hd)   # the 1/sqrt(d_head) of the scores, folded into W_q
        b_in[:d] /= math.sqrt(hd)
        Vqkv = self._rope(self._linear_V(y, yname, W_in, b_in))
        q, k, v = (self._emit(f"{name}.{n}", Vqkv[..., i * d:(i + 1) * d], N.IDENTITY) for i, n in enumerate("qkv"))
        heads = lambda t: t.reshape(t.shape[0], T, h, hd).transpose(1, 2)  # (B, h, T, hd)
        S = self._scores(name, q, k, heads)
        A = self._softmax(name, S)
        O = self._attend(name, A, v, heads, fan=d)
        O = O.transpose(1, 2).reshape(B, T, d)
        self._syn(x, xname, 1)
        V = x.value() + O @ w[f"{pre}.attn.out_proj.weight"].T + w[f"{pre}.attn.out_proj.bias"]
        return self._emit(f"{name}.res", V, N.IDENTITY)

    def _qkv_bias(self, pre: str) -> torch.Tensor:
        """The q/k/v biases: fused (ViT), or EVA-02's q and v biases with no k bias."""
        w = self.w
        if f"{pre}.attn.in_proj_bias" in w:
            return w[f"{pre}.attn.in_proj_bias"]
        qb = w[f"{pre}.attn.q_bias"]
        return torch.cat([qb, torch.zeros_like(qb), w[f"{pre}.attn.v_bias"]])

    def _rope(self, Vqkv: torch.Tensor) -> torch.Tensor:
        """EVA-02's 2-D RoPE on the q and k potentials of the patch tokens (not the class token). It is a
        fixed linear map per token position n (q_n -> R(n) q_n, pairwise rotations by constant angles), so
        it is folded into the receiving stage: the q and k neurons of token n have synaptic weights R(n) W
        and bias R(n) b. Their fan-in is unchanged (W is dense already): no extra synapses, no new neurons."""
        if not hasattr(self.m, "rope_sin"):
            return Vqkv   # ViT: no rotary embedding
        from .eva02 import apply_rope

        d, h = self.d, self.heads
        B, T, _ = Vqkv.shape
        qk = Vqkv[..., :2 * d].reshape(B, T, 2, h, d // h).permute(0, 2, 3, 1, 4)   # (B, 2, h, T, hd)
        qk = apply_rope(qk, self.m.rope_sin.to(Vqkv.dtype), self.m.rope_cos.to(Vqkv.dtype))
        qk = qk.permute(0, 3, 1, 2, 4).reshape(B, T, 2 * d)
        return torch.cat([qk, Vqkv[..., 2 * d:]], dim=-1)

    def _scores(self, name: str, q: N.Spikes, k: N.Spikes, heads=lambda t: t) -> torch.Tensor:
        """QK^T: s_ij = sum_d q_id k_jd by quarter-square neurons per (i, j, d); returns the potential S
        (B, h, T, T) that the softmax neurons receive."""
        qv, kv = heads(q.value()), heads(k.value())
        T = qv.shape[-2]
        self._syn(q, f"{name}.q", 4 * T)
        self._syn(k, f"{name}.k", 4 * T)
        qa, qb = (_lift(t, heads, qv) for t in (q.a, q.b))
        ka, kb = (_lift(t, heads, kv) for t in (k.a, k.b))
        qk = self._product(f"{name}.qk", (qv[..., :, None, :], qa[..., :, None, :], qb[..., :, None, :]),
                           (kv[..., None, :, :], ka[..., None, :, :], kb[..., None, :, :]))
        for s, _, pname in qk:
            self._syn(s, pname, 2)                                   # to e_ij and to y_ij
        return sum(wgt * s.value() for s, wgt, _ in qk).sum(-1)

    def _softmax(self, name: str, S: torch.Tensor) -> N.Spikes:
        """Softmax over the last axis of the potential S: e = exp(S - m), L = log(sum_j e), y = exp(S - m - L)."""
        T = S.shape[-1]
        if self._calib and self._phase == "m":
            # m per query row (the same for every key j, so the softmax is unchanged): the calibrated row
            # maximum raised by `margin` of the row's width, so that S - m <= 0 for nearly every test image
            row_hi = S.amax(dim=(0, S.dim() - 1))[..., None]
            row_lo = S.amin(dim=(0, S.dim() - 1))[..., None]
            o = self._m_obs.get(name)
            self._m_obs[name] = (row_lo, row_hi) if o is None else (torch.minimum(o[0], row_lo), torch.maximum(o[1], row_hi))
        m = self.consts.get(name, 0.0)
        # e = exp(S - m) and the probabilities lie in [0, 1]: fixed intervals, nothing to calibrate
        e = self._emit(f"{name}.e", S - m, N.EXP, (0.0, 1.0))
        self._syn(e, f"{name}.e", 1)
        L = self._emit(f"{name}.L", e.value().sum(-1, keepdim=True), N.LOG)
        self._syn(L, f"{name}.L", T)
        return self._emit(f"{name}.a", S - m - L.value(), N.EXP, (0.0, 1.0))

    def _attend(self, name: str, A: N.Spikes, v: N.Spikes, heads=lambda t: t, fan: int = 1) -> torch.Tensor:
        """AV: o_id = sum_j A_ij v_jd by quarter-square neurons per (i, j, d); returns the summed potential
        (B, h, T, hd); `fan`: the neurons each product piece reaches downstream (out_proj: d)."""
        vv = heads(v.value())
        T, hd = vv.shape[-2], vv.shape[-1]
        self._syn(A, f"{name}.a", 4 * hd)
        self._syn(v, f"{name}.v", 4 * T)
        Aa, Ab = (_lift(t, lambda u: u[0], A.t) for t in (A.a, A.b))
        va, vb = (_lift(t, heads, vv) for t in (v.a, v.b))
        av = self._product(f"{name}.av", (A.value()[..., None], Aa[..., None], Ab[..., None]),
                           (vv[..., None, :, :], va[..., None, :, :], vb[..., None, :, :]))
        for s, _, pname in av:
            self._syn(s, pname, fan)
        return sum(wgt * s.value() for s, wgt, _ in av).sum(-2)

    def _mlp(self, name: str, y: N.Spikes, yname: str, x: N.Spikes, xname: str, pre: str, mlp) -> N.Spikes:
        w, d = self.w, self.d
        if isinstance(mlp, Mlp):
            V1 = self._linear_V(y, yname, w[f"{pre}.mlp.fc1.weight"], w[f"{pre}.mlp.fc1.bias"])
            # fc1's neurons receive once and both GELU pieces emit from that potential (2 neurons per unit)
            self._syn(y, yname, V1.shape[-1])  # the second GELU piece's neuron has its own synapses
            g = [self._emit(f"{name}.{fn.name}", V1, fn) for fn in N.GELU]
            H = sum(s.value() for s in g)
            for s, fn in zip(g, N.GELU):
                self._syn(s, f"{name}.{fn.name}", d)
        else:
            Vg = self._linear_V(y, yname, w[f"{pre}.mlp.gate.weight"], w[f"{pre}.mlp.gate.bias"])
            Vu = self._linear_V(y, yname, w[f"{pre}.mlp.up.weight"], w[f"{pre}.mlp.up.bias"])
            self._syn(y, yname, Vg.shape[-1])  # the second SiLU piece's neuron has its own synapses
            g = [self._emit(f"{name}.{fn.name}", Vg, fn) for fn in N.SILU]
            u = self._emit(f"{name}.u", Vu, N.IDENTITY)
            for s, fn in zip(g, N.SILU):
                self._syn(s, f"{name}.{fn.name}", 4)
            self._syn(u, f"{name}.u", 4)
            ga, gb = _t(g[0].a) + _t(g[1].a), _t(g[0].b) + _t(g[1].b)
            parts = self._product(f"{name}.gu", (sum(s.value() for s in g), ga, gb), (u.value(), _t(u.a), _t(u.b)))
            H = sum(wgt * s.value() for s, wgt, _ in parts)
            if hasattr(mlp, "norm"):
                # EVA-02 B/L's sub-LayerNorm on the gated product: the product neurons' pieces merge into
                # one hidden neuron per unit (fan-out 1), which feeds the LayerNorm neurons, then fc2
                for s, _, pname in parts:
                    self._syn(s, pname, 1)
                hid = self._emit(f"{name}.h", H, N.IDENTITY)
                z = self._layernorm(f"{name}.ln", hid, f"{name}.h", w[f"{pre}.mlp.norm.weight"],
                                    w[f"{pre}.mlp.norm.bias"], mlp.norm.eps)
                self._syn(z, f"{name}.ln.y", d)
                H = z.value()
            else:
                for s, _, pname in parts:
                    self._syn(s, pname, d)
        self._syn(x, xname, 1)
        V = x.value() + H @ w[f"{pre}.mlp.fc2.weight"].T + w[f"{pre}.mlp.fc2.bias"]
        return self._emit(f"{name}.res", V, N.IDENTITY)

    def _forward(self, img: torch.Tensor) -> torch.Tensor:
        self._fan = {}
        out = self._forward_net(img)
        if not self._calib:
            self.fanout = dict(self._fan)  # the same every batch: the graph is static
        return out

    def _forward_net(self, img: torch.Tensor) -> torch.Tensor:
        m, w = self.m, self.w
        patches = m.patchify(img)
        # input layer: each pixel (in [0, 1]) is one TTFS spike
        inp = N.Spikes(N.encode(patches, 0.0, 1.0, None if self._calib else self.p), 0.0, 1.0)
        if not self._calib:
            st = self.stats["input"]
            st["neurons"] += inp.t.numel()
            st["spikes"] += int(inp.spiked.sum())
        V = self._linear_V(inp, "input", w["patch_embed.weight"], w["patch_embed.bias"])
        cls = (w["cls_token"]).expand(V.shape[0], 1, -1)
        V = torch.cat([cls, V], dim=1) + w["pos_embed"]   # the class token: a bias-only neuron
        x, xname = self._emit("embed", V, N.IDENTITY), "embed"
        for i, blk in enumerate(m.blocks):
            pre = f"blocks.{i}"
            y = self._layernorm(f"b{i}.ln1", x, xname, w[f"{pre}.norm1.weight"], w[f"{pre}.norm1.bias"], blk.norm1.eps)
            x, xname = self._attention(f"b{i}.attn", y, f"b{i}.ln1.y", x, xname, pre), f"b{i}.attn.res"
            y = self._layernorm(f"b{i}.ln2", x, xname, w[f"{pre}.norm2.weight"], w[f"{pre}.norm2.bias"], blk.norm2.eps)
            x, xname = self._mlp(f"b{i}.mlp", y, f"b{i}.ln2.y", x, xname, pre, blk.mlp), f"b{i}.mlp.res"
        if getattr(m, "pool", "token") == "avg":
            y = self._avg_pool_head(x, xname)
        else:
            y = self._cls_head(x, xname)
        W, bias = w["head.weight"], w["head.bias"]
        self._syn(y, "final.ln.y", W.shape[0])
        floor = torch.as_tensor(y.a, dtype=W.dtype).expand(y.t.shape[1:])
        return (y.psp() @ W.T + (floor @ W.T + bias))[:, 0]   # logits: the head's membrane potentials

    def _avg_pool_head(self, x: N.Spikes, xname: str) -> N.Spikes:
        """EVA-02's head input: the mean of the patch tokens (one mean neuron per channel, each patch token's
        neuron reaching it with weight 1/n), then fc_norm as LayerNorm neurons."""
        rest = lambda v: v[1:] if torch.is_tensor(v) and v.dim() >= 2 else v
        pat = N.Spikes(x.t[:, 1:], rest(x.a), rest(x.b))
        self._syn(pat, xname + "[patches]", 1)
        pooled = self._emit("final.pool", pat.value().mean(1, keepdim=True), N.IDENTITY)
        return self._layernorm("final.ln", pooled, "final.pool", self.w["fc_norm.weight"], self.w["fc_norm.bias"],
                               self.m.fc_norm.eps)

    def _cls_head(self, x: N.Spikes, xname: str) -> N.Spikes:
        m, w = self.m, self.w
        # only the class token reaches the head: the final LayerNorm is built for that token alone
        first = lambda v: v[:1] if torch.is_tensor(v) and v.dim() >= 2 else v
        cls_x = N.Spikes(x.t[:, :1], first(x.a), first(x.b))
        if not self._calib:
            self.stats[xname + "[cls]"]["spikes"] += int(cls_x.spiked.sum())  # a subset: no new neurons
        return self._layernorm("final.ln", cls_x, xname + "[cls]", w["norm.weight"], w["norm.bias"], m.norm.eps)

    # ---- summaries -----------------------------------------------------------------------------------
    def summary(self, n_images: int) -> dict:
        neurons = sum(v["neurons"] for v in self.stats.values())
        spikes = sum(v["spikes"] for v in self.stats.values())
        return {"neurons": neurons / n_images, "spikes": spikes / n_images, "sops": self.sops / n_images,
                "spikes_per_neuron": spikes / max(neurons, 1)}
