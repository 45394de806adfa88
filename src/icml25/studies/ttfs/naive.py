"""Naive TTFS baseline: classic single-kernel, non-negative TTFS (Rueckauer & Liu 2018 / T2FSNN style).

Every spiking neuron codes a value in [0, b] only (negative values are lost: the neuron stays silent), GELU
and SiLU are treated as ReLU (which that code gives for free), and, as in prior TTFS work, which had no
neuron for them, LayerNorm, softmax and the attention products are computed in float between the spiking
layers (their multiply-accumulates are charged as MACs in the energy). It shows why TTFSFormer's signed
intervals and new neurons are needed.
"""
from __future__ import annotations

import math

import torch

from . import neurons as N
from .snn import TTFSViT
from .vit import Mlp


class NaiveTTFSViT(TTFSViT):
    def _emit(self, name, V, fn):
        # one kernel for every neuron: non-negative identity code (ReLU by clipping at 0)
        return super()._emit(name, V, N.RELU)

    def _float_layernorm(self, x: torch.Tensor, gamma, beta, eps):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + eps) * gamma + beta

    def _forward_net(self, img):
        m, w, d, h = self.m, self.w, self.d, self.heads
        hd = d // h
        inp = N.Spikes(N.encode(m.patchify(img), 0.0, 1.0, None if self._calib else self.p), 0.0, 1.0)
        if not self._calib:
            self.stats["input"]["neurons"] += inp.t.numel()
            self.stats["input"]["spikes"] += int(inp.spiked.sum())
        V = self._linear_V(inp, "input", w["patch_embed.weight"], w["patch_embed.bias"])
        V = torch.cat([w["cls_token"].expand(V.shape[0], 1, -1), V], dim=1) + w["pos_embed"]
        x, xname = self._emit("embed", V, N.IDENTITY), "embed"
        B, T = V.shape[:2]
        for i, blk in enumerate(m.blocks):
            pre = f"blocks.{i}"
            # float LayerNorm on the decoded spikes, re-encoded by non-negative neurons
            ln = self._float_layernorm(x.value(), w[f"{pre}.norm1.weight"], w[f"{pre}.norm1.bias"], blk.norm1.eps)
            self._syn(x, xname, 1)
            y = self._emit(f"b{i}.ln1", ln, N.IDENTITY)
            W_in = w[f"{pre}.attn.in_proj_weight"]
            Vqkv = self._rope(self._linear_V(y, f"b{i}.ln1", W_in, self._qkv_bias(pre)))  # RoPE: EVA-02 only
            q, k, v = (self._emit(f"b{i}.{n}", Vqkv[..., j * d:(j + 1) * d], N.IDENTITY) for j, n in enumerate("qkv"))
            heads = lambda t: t.reshape(B, T, h, hd).transpose(1, 2)
            for s, n in ((q, "q"), (k, "k"), (v, "v")):
                self._syn(s, f"b{i}.{n}", 1)  # read out into the float attention
            att = torch.softmax(heads(q.value()) @ heads(k.value()).transpose(-1, -2) / math.sqrt(hd), -1)
            o = (att @ heads(v.value())).transpose(1, 2).reshape(B, T, d)
            if not self._calib:
                self.nonspiking_macs += 2 * T * T * d * B
            ob = self._emit(f"b{i}.o", o, N.IDENTITY)
            self._syn(x, xname, 1)
            Vr = x.value() + self._linear_V(ob, f"b{i}.o", w[f"{pre}.attn.out_proj.weight"], w[f"{pre}.attn.out_proj.bias"])
            x, xname = self._emit(f"b{i}.res1", Vr, N.IDENTITY), f"b{i}.res1"
            ln = self._float_layernorm(x.value(), w[f"{pre}.norm2.weight"], w[f"{pre}.norm2.bias"], blk.norm2.eps)
            self._syn(x, xname, 1)
            y = self._emit(f"b{i}.ln2", ln, N.IDENTITY)
            if isinstance(blk.mlp, Mlp):
                g = self._emit(f"b{i}.fc1", self._linear_V(y, f"b{i}.ln2", w[f"{pre}.mlp.fc1.weight"],
                                                           w[f"{pre}.mlp.fc1.bias"]), N.IDENTITY)  # GELU -> ReLU
                hid, hname = g, f"b{i}.fc1"
            else:
                gate = self._emit(f"b{i}.gate", self._linear_V(y, f"b{i}.ln2", w[f"{pre}.mlp.gate.weight"],
                                                               w[f"{pre}.mlp.gate.bias"]), N.IDENTITY)  # SiLU -> ReLU
                up = self._emit(f"b{i}.up", self._linear_V(y, f"b{i}.ln2", w[f"{pre}.mlp.up.weight"],
                                                           w[f"{pre}.mlp.up.bias"]), N.IDENTITY)
                self._syn(gate, f"b{i}.gate", 1)
                self._syn(up, f"b{i}.up", 1)
                if not self._calib:
                    self.nonspiking_macs += gate.t.numel()  # the float gate product
                hid, hname = self._emit(f"b{i}.gu", gate.value() * up.value(), N.IDENTITY), f"b{i}.gu"
                if hasattr(blk.mlp, "norm"):  # EVA-02 B/L's sub-LayerNorm: in float, like the block norms
                    ln = self._float_layernorm(hid.value(), w[f"{pre}.mlp.norm.weight"], w[f"{pre}.mlp.norm.bias"],
                                               blk.mlp.norm.eps)
                    self._syn(hid, hname, 1)
                    hid, hname = self._emit(f"b{i}.mlpln", ln, N.IDENTITY), f"b{i}.mlpln"
            self._syn(x, xname, 1)
            Vr = x.value() + self._linear_V(hid, hname, w[f"{pre}.mlp.fc2.weight"], w[f"{pre}.mlp.fc2.bias"])
            x, xname = self._emit(f"b{i}.res2", Vr, N.IDENTITY), f"b{i}.res2"
        if getattr(m, "pool", "token") == "avg":  # EVA-02: mean of the patch tokens, fc_norm (in float)
            ln = self._float_layernorm(x.value()[:, 1:].mean(1, keepdim=True), w["fc_norm.weight"],
                                       w["fc_norm.bias"], m.fc_norm.eps)
        else:
            ln = self._float_layernorm(x.value()[:, :1], w["norm.weight"], w["norm.bias"], m.norm.eps)
        y = self._emit("final.ln", ln, N.IDENTITY)
        self._syn(y, "final.ln", w["head.weight"].shape[0])
        floor = torch.as_tensor(y.a, dtype=torch.float64).expand(y.t.shape[1:])
        return (y.psp() @ w["head.weight"].T + (floor @ w["head.weight"].T + w["head.bias"]))[:, 0]

    def summary(self, n_images: int) -> dict:
        out = super().summary(n_images)
        out["nonspiking_macs"] = self.nonspiking_macs / n_images
        return out
