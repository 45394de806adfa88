"""The D-BETA model at a configurable size: ECG encoder (wav2vec2-style conv extractor + transformer, as
fairseq-signals), T5 text encoder, M3AE-style cross-modal layers, and the heads and losses of the
official models/dbeta.py and losses/ (written anew here)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ECGEncoder(nn.Module):
    """conv feature extractor [(C, k, s)] x n over 12 leads -> LayerNorm -> projection to d -> + convolutional
    positional encoding; a CLS embedding is prepended, then (optionally MAE-masked) a post-LN transformer."""

    def __init__(self, m: dict):
        super().__init__()
        C, k, s, n = int(m["conv_channels"]), int(m["conv_kernel"]), int(m["conv_stride"]), int(m["conv_layers"])
        d = int(m["d_model"])
        layers, cin = [], 12
        for i in range(n):
            layers += [nn.Conv1d(cin, C, k, s, bias=False)]
            if i == 0:
                layers += [nn.GroupNorm(C, C)]  # fairseq "default" extractor mode: group norm on the first layer
            layers += [nn.GELU()]
            cin = C
        self.extractor = nn.Sequential(*layers)
        self.feat_norm = nn.LayerNorm(C)
        self.proj = nn.Linear(C, d)
        kp, gp = int(m["conv_pos"]), int(m["conv_pos_groups"])
        self.pos_conv = nn.Conv1d(d, d, kp, padding=kp // 2, groups=gp)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(float(m["dropout"]))
        layer = nn.TransformerEncoderLayer(d, int(m["heads"]), int(m["ffn"]), float(m["dropout"]), activation="gelu",
                                           batch_first=True, norm_first=False)
        self.layers = nn.TransformerEncoder(layer, int(m["layers"]), enable_nested_tensor=False)
        self.conv_cfg = (n, k, s)

    def n_tokens(self, T: int) -> int:
        n, k, s = self.conv_cfg
        for _ in range(n):
            T = (T - k) // s + 1
        return T

    def embed(self, x):
        f = self.extractor(x).transpose(1, 2)                      # (B, L, C)
        f = self.proj(self.feat_norm(f))
        p = self.pos_conv(f.transpose(1, 2))[..., : f.shape[1]]
        return f + F.gelu(p).transpose(1, 2)

    def run(self, tokens):
        return self.layers(self.drop(self.norm(tokens)))

    def forward(self, x, mask_ratio: float = 0.0):
        """Returns (tokens incl. CLS at 0, mask (B, L) 1 = masked or None, ids_restore or None)."""
        e = self.embed(x)
        tok = torch.cat([self.cls.expand(len(e), -1, -1), e], 1)
        if mask_ratio > 0:
            tok, mask, restore = random_masking(tok, mask_ratio)
            return self.run(tok), mask, restore
        return self.run(tok), None, None


def random_masking(x, mask_ratio: float):
    """MAE masking of the non-CLS tokens, as the official DBETA.random_masking: keep int(L * (1 - r)) random
    tokens per record; mask is 1 on the removed tokens, in the original order."""
    cls, x = x[:, :1], x[:, 1:]
    B, L, D = x.shape
    keep = int(L * (1 - mask_ratio))
    noise = torch.rand(B, L, device=x.device)
    shuffle = torch.argsort(noise, dim=1)
    restore = torch.argsort(shuffle, dim=1)
    kept = torch.gather(x, 1, shuffle[:, :keep].unsqueeze(-1).expand(-1, -1, D))
    mask = torch.ones(B, L, device=x.device)
    mask[:, :keep] = 0
    mask = torch.gather(mask, 1, restore)
    return torch.cat([cls, kept], 1), mask, restore


class Pooler(nn.Module):
    """First token -> dense -> tanh (M3AE / BERT pooler)."""

    def __init__(self, h):
        super().__init__()
        self.dense = nn.Linear(h, h)

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class CrossLayer(nn.Module):
    """BertCrossLayer: self-attention, cross-attention to the other stream, feed-forward; post-LN."""

    def __init__(self, h, heads, ffn, p):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(h, heads, dropout=p, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(h, heads, dropout=p, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(h, ffn), nn.GELU(), nn.Linear(ffn, h))
        self.n1, self.n2, self.n3 = nn.LayerNorm(h), nn.LayerNorm(h), nn.LayerNorm(h)
        self.drop = nn.Dropout(p)

    def forward(self, x, y, x_pad=None, y_pad=None):
        x = self.n1(x + self.drop(self.self_attn(x, x, x, key_padding_mask=x_pad, need_weights=False)[0]))
        x = self.n2(x + self.drop(self.cross_attn(x, y, y, key_padding_mask=y_pad, need_weights=False)[0]))
        return self.n3(x + self.drop(self.ff(x)))


class MEMHead(nn.Module):
    """MAE decoder: embed visible tokens, fill mask tokens, unshuffle, positional encoding, transformer,
    predict 12 x patch raw samples per token."""

    def __init__(self, h, m: dict, patch: int):
        super().__init__()
        dd = int(m["mem_dim"])
        self.embed = nn.Linear(h, dd)
        self.mask_token = nn.Parameter(torch.randn(1, 1, dd) * 0.02)
        self.register_buffer("pos", _sinusoid(512, dd), persistent=False)
        layer = nn.TransformerEncoderLayer(dd, int(m["mem_heads"]), 4 * dd, 0.0, activation="gelu", batch_first=True)
        self.layers = nn.TransformerEncoder(layer, int(m["mem_layers"]) + 1, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dd)
        self.pred = nn.Linear(dd, 12 * patch)
        self.patch = patch

    def forward(self, x, restore):
        x = self.embed(x)
        L = restore.shape[1]
        fill = self.mask_token.expand(len(x), L + 1 - x.shape[1], -1)
        body = torch.cat([x[:, 1:], fill], 1)
        body = torch.gather(body, 1, restore.unsqueeze(-1).expand(-1, -1, x.shape[2]))
        x = torch.cat([x[:, :1], body], 1) + self.pos[: L + 1]
        x = self.pred(self.norm(self.layers(x)))[:, 1:]
        return x.view(len(x), L, 12, self.patch)


def _sinusoid(n, d):
    pos = torch.arange(n).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def mem_target(ecg, n_tokens: int, norm: bool = True):
    """The official get_targets: per-lead normalisation over the whole record (norm_pix_loss), the tail
    cut to n_tokens * patch samples, split into (B, L, 12 * patch) patches."""
    B, C, T = ecg.shape
    patch = T // n_tokens
    tgt = ecg[..., : n_tokens * patch]
    if norm:
        tgt = (tgt - tgt.mean(-1, keepdim=True)) / (tgt.var(-1, keepdim=True) + 1e-6) ** 0.5
    return tgt.view(B, C, n_tokens, patch).permute(0, 2, 1, 3).reshape(B, n_tokens, C * patch)


def mem_loss(pred, target, mask):
    """MSE per token, averaged over the masked tokens only (official losses/loss.py)."""
    per = ((pred.reshape(target.shape) - target) ** 2).mean(-1)
    return (per * mask).sum() / mask.sum()


def ets_loss(ecg_feats, text_feats, aligned, scale: float = 1.0, bias=None):
    """SigLIP-style loss of the official losses/ets.py: logits = s * e t^T (+ b); target +1 on aligned
    diagonal entries, -1 on unaligned diagonal entries and everywhere off the diagonal;
    loss = -mean log sigmoid(target * logits)."""
    logits = scale * ecg_feats @ text_feats.T
    if bias is not None:
        logits = logits + bias
    n = len(ecg_feats)
    gt = -torch.ones(n, n, dtype=logits.dtype, device=logits.device)
    gt[torch.arange(n), torch.arange(n)] = 2 * aligned.to(logits.dtype) - 1
    return -F.logsigmoid(gt * logits).mean()


def clip_loss(ecg_feats, text_feats, logit_scale):
    """Symmetric InfoNCE on L2-normalised features (the CLIP / MERL-like baseline)."""
    e = F.normalize(ecg_feats, dim=-1)
    t = F.normalize(text_feats, dim=-1)
    logits = logit_scale.exp().clamp(max=100) * e @ t.T
    y = torch.arange(len(e), device=e.device)
    return 0.5 * (F.cross_entropy(logits, y) + F.cross_entropy(logits.T, y))


class DBETA(nn.Module):
    """All arms share this module; each method uses the parts its losses need (see training.py)."""

    def __init__(self, m: dict, text_src: str, T: int):
        super().__init__()
        from transformers import T5EncoderModel

        self.ecg = ECGEncoder(m)
        self.text = T5EncoderModel.from_pretrained(text_src)
        h, dt, d = int(m["hidden"]), int(self.text.config.d_model), int(m["d_model"])
        self.text_proj, self.ecg_proj = nn.Linear(dt, h), nn.Linear(d, h)
        self.uni_ecg_pool, self.uni_text_pool = Pooler(h), Pooler(h)
        self.type_emb = nn.Embedding(2, h)
        ncross, heads, p = int(m["cross_layers"]), int(m["cross_heads"]), float(m["dropout"])
        self.text_layers = nn.ModuleList([CrossLayer(h, heads, 4 * h, p) for _ in range(ncross)])
        self.ecg_layers = nn.ModuleList([CrossLayer(h, heads, 4 * h, p) for _ in range(ncross)])
        self.mm_text_pool, self.mm_ecg_pool = Pooler(h), Pooler(h)
        self.etm_head = nn.Linear(2 * h, 2)
        vocab = int(self.text.config.vocab_size)
        self.mlm_head = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.LayerNorm(h), nn.Linear(h, vocab))
        self.n_tokens = self.ecg.n_tokens(T)
        self.patch = T // self.n_tokens
        self.mem_head = MEMHead(h, m, self.patch)
        self.mem_layer = int(m["mem_layer"])
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))  # CLIP baseline only

    # -- unimodal features
    def ecg_tokens(self, ecg, mask_ratio=0.0):
        tok, mask, restore = self.ecg(ecg, mask_ratio)
        return self.ecg_proj(tok), mask, restore

    def text_tokens(self, ids, att):
        return self.text_proj(self.text(input_ids=ids, attention_mask=att).last_hidden_state)

    def ecg_features(self, ecg):
        """Downstream features: the unimodal ECG pooler on the unmasked record (official unimodal_ecg_pooler)."""
        tok, _, _ = self.ecg_tokens(ecg)
        return self.uni_ecg_pool(tok)

    def ecg_mean_features(self, ecg):
        """Mean of the encoder's output tokens (the MAE / random-init arms' features, ST-MEM style)."""
        tok, _, _ = self.ecg(ecg)
        return tok[:, 1:].mean(1)

    def text_features(self, ids, att):
        return self.uni_text_pool(self.text_tokens(ids, att))

    # -- the full D-BETA forward
    def forward(self, ecg, ids, att, mlm_ids, mask_ratio):
        """ecg: (B, 12, T); ids/att: the (possibly negative) report tokens; mlm_ids: the same tokens with
        MLM masking. Returns the pieces of the four losses."""
        out = {}
        t = self.text_tokens(mlm_ids, att)
        out["uni_text"] = self.uni_text_pool(t)
        e, mask, restore = self.ecg_tokens(ecg, mask_ratio)
        out["uni_ecg"] = self.uni_ecg_pool(e)
        out["mem_mask"], out["restore"] = mask, restore
        x = t + self.type_emb(torch.zeros_like(ids))
        y = e + self.type_emb.weight[1]
        pad = att == 0
        for i, (tl, el) in enumerate(zip(self.text_layers, self.ecg_layers)):
            if i == self.mem_layer:
                out["mem_in"] = y
            x, y = tl(x, y, pad, None), el(y, x, None, pad)
        if "mem_in" not in out:
            out["mem_in"] = y
        out["mlm_logits"] = self.mlm_head(x)
        out["etm_logits"] = self.etm_head(torch.cat([self.mm_text_pool(x), self.mm_ecg_pool(y)], -1))
        out["mem_pred"] = self.mem_head(out["mem_in"], restore)
        return out
