"""Pretraining of every arm at equal budget (same encoder, steps, batch, optimiser), and the supervised
from-scratch baseline on the 1% labels."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

PRETRAINED = ("mae", "clip", "dbeta_non3s", "dbeta")
TEXT_ARMS = ("clip", "dbeta_non3s", "dbeta", "random")


def build(cfg: dict, data_dir: Path, seed: int):
    import torch

    from . import data
    from .model import DBETA

    torch.manual_seed(seed)
    T = int(round(float(cfg["data"]["fs"]) * float(cfg["data"]["seconds"])))
    # the text tower starts from from_pretrained(dir): flan-t5-base at full scale, the saved init at mini
    # (the same for every seed, as a pretrained checkpoint would be); the rest is drawn from the seed
    return DBETA(cfg["model"], data.text_source(cfg, data_dir), T)


def tokenizer(cfg, data_dir):
    from transformers import AutoTokenizer

    from . import data

    return AutoTokenizer.from_pretrained(data.text_source(cfg, data_dir))


def lead_mask(x, p: float, gen):
    """fairseq-signals' random lead masking: each lead zeroed with probability p (pretraining input only)."""
    import torch

    if p <= 0:
        return x
    keep = (torch.rand(x.shape[0], x.shape[1], 1, generator=gen) >= p).to(x.dtype)
    return x * keep


class Negatives:
    """Negative reports for ETM / ETS: int(0.5 B + U[0, 1)) records of a batch get another report and
    is_aligned = 0. N3S: a uniform pick among the record's k most dissimilar reports (precomputed in
    preprocess with the -q search); random: a uniform pick among all other distinct reports."""

    def __init__(self, data_dir: Path, mode: str, rng):
        z = np.load(data_dir / "n3s.npz")
        self.cand, self.rep_idx = z["candidates"], z["report_index"]
        self.uniq = json.loads((data_dir / "n3s_reports.json").read_text())
        self.mode, self.rng = mode, rng

    def pick(self, i: int) -> int:
        """Index (into the unique reports) of a negative report for pretraining record i."""
        if self.mode == "n3s":
            return int(self.rng.choice(self.cand[self.rep_idx[i]]))
        own = self.rep_idx[i]
        j = int(self.rng.integers(len(self.uniq) - 1))
        return j + (j >= own)

    def batch(self, idx: np.ndarray, texts: list[str]):
        B = len(idx)
        aligned = np.ones(B, np.float32)
        n_neg = int(B * 0.5 + self.rng.random())
        out = [texts[i] for i in idx]
        for b in self.rng.choice(B, size=n_neg, replace=False):
            out[b] = self.uniq[self.pick(int(idx[b]))]
            aligned[b] = 0.0
        return out, aligned


def pretrain(cfg: dict, method: str, seed: int, data_dir: Path):
    """Returns (model, curve [(step, loss)], cpu seconds)."""
    import torch
    import torch.nn.functional as F
    from transformers import DataCollatorForLanguageModeling

    from .model import clip_loss, ets_loss, mem_loss, mem_target

    tr = cfg["train"]
    model = build(cfg, data_dir, seed)
    if method == "random":
        return model, [], 0.0
    z = np.load(data_dir / "pretrain.npz")
    X = torch.from_numpy(z["x"])
    texts = json.loads((data_dir / "pretrain_reports.json").read_text())
    tok = tokenizer(cfg, data_dir)
    mlm = DataCollatorForLanguageModeling(tok, mlm_probability=float(tr["mlm_prob"]), return_tensors="pt")
    rng = np.random.default_rng([seed, 11])
    gen = torch.Generator().manual_seed(seed + 101)
    negs = Negatives(data_dir, "n3s" if method == "dbeta" else "random", rng) if method.startswith("dbeta") else None
    steps, B = int(tr["steps"]), int(tr["batch"])
    opt = torch.optim.AdamW(model.parameters(), lr=float(tr["lr"]), weight_decay=float(tr["weight_decay"]))
    warm = max(1, int(float(tr["warmup"]) * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + np.cos(np.pi * min(1.0, s / steps))))
    ratio = float(tr["mem_ratio"])
    model.train()
    curve, t0 = [], time.process_time()
    order = rng.permutation(len(X))
    pos = 0
    for step in range(steps):
        if pos + B > len(order):
            order, pos = rng.permutation(len(X)), 0
        idx = order[pos:pos + B]
        pos += B
        ecg = lead_mask(X[idx], float(tr["lead_mask"]), gen)
        if method == "mae":
            e, mask, restore = model.ecg_tokens(ecg, ratio)
            loss = mem_loss(model.mem_head(e, restore), mem_target(ecg, model.n_tokens), mask)
        elif method == "clip":
            enc = tok([texts[i] for i in idx], padding=True, truncation=True, return_tensors="pt")
            e, _, _ = model.ecg_tokens(ecg)
            loss = clip_loss(model.uni_ecg_pool(e), model.text_features(enc["input_ids"], enc["attention_mask"]),
                             model.logit_scale)
        else:
            batch_texts, aligned = negs.batch(idx, texts)
            enc = tok(batch_texts, padding=True, truncation=True)
            feats = [{"input_ids": a, "attention_mask": m} for a, m in zip(enc["input_ids"], enc["attention_mask"])]
            col = mlm(feats)
            ids = torch.tensor(enc["input_ids"])
            att = col["attention_mask"]
            out = model(ecg, ids, att, col["input_ids"], ratio)
            lab = col["labels"]
            l_mlm = F.cross_entropy(out["mlm_logits"].reshape(-1, out["mlm_logits"].shape[-1]), lab.reshape(-1),
                                    ignore_index=-100)
            l_mem = mem_loss(out["mem_pred"], mem_target(ecg, model.n_tokens), out["mem_mask"])
            al = torch.from_numpy(aligned)
            l_etm = F.cross_entropy(out["etm_logits"], al.long())
            l_ets = ets_loss(out["uni_ecg"], out["uni_text"], al, float(tr["ets_scale"]))
            loss = l_mlm + l_mem + l_etm + l_ets
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(tr["clip_grad"]))
        opt.step()
        sched.step()
        if step % max(1, steps // 50) == 0 or step == steps - 1:
            curve.append((step, loss.item()))
    model.eval()
    return model, curve, time.process_time() - t0


def train_supervised(cfg: dict, seed: int, x, y):
    """The ECG encoder (random init) + a linear head on mean-pooled tokens, BCE on the labelled subset."""
    import torch
    import torch.nn as nn

    from .model import ECGEncoder

    torch.manual_seed(seed)
    sup = cfg["supervised"]
    enc = ECGEncoder(cfg["model"])
    head = nn.Linear(int(cfg["model"]["d_model"]), y.shape[1])
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=float(sup["lr"]), weight_decay=float(cfg["train"]["weight_decay"]))
    X, Y = torch.from_numpy(x), torch.from_numpy(y.astype(np.float32))
    rng = np.random.default_rng([seed, 13])
    enc.train()
    for _ in range(int(sup["steps"])):
        idx = rng.choice(len(X), size=min(int(sup["batch"]), len(X)), replace=False)
        tok, _, _ = enc(X[idx])
        loss = nn.functional.binary_cross_entropy_with_logits(head(tok[:, 1:].mean(1)), Y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    enc.eval()

    def predict(xs):
        with torch.no_grad():
            out = [torch.sigmoid(head(enc(torch.from_numpy(xs[i:i + 256]))[0][:, 1:].mean(1))).numpy()
                   for i in range(0, len(xs), 256)]
        return np.concatenate(out)

    return predict
