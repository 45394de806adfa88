"""Tiny HF GPT-2 language models: mixture training (plain or DoReMi Group-DRO), perplexity, embeddings.

Models are `GPT2LMHeadModel`s saved with `save_pretrained` and loaded with `from_pretrained`, the same code
path as a Hub checkpoint at full scale. FLOPs are counted as 6 x params x tokens for training and
2 x params x tokens for a forward pass (the accounting the paper's compute comparison uses).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def _quiet() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def build(mcfg: dict, vocab_size: int, seed: int):
    import torch

    _quiet()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=vocab_size, n_positions=int(mcfg["ctx"]), n_embd=int(mcfg["d_model"]),
                     n_layer=int(mcfg["n_layer"]), n_head=int(mcfg["n_head"]), resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, tie_word_embeddings=True)
    return GPT2LMHeadModel(cfg)


def n_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def load(path: Path):
    from transformers import GPT2LMHeadModel

    _quiet()
    return GPT2LMHeadModel.from_pretrained(str(path)).eval()


def save(model, path: Path, tokenizer_file: Path | None = None) -> None:
    model.save_pretrained(str(path))
    if tokenizer_file is not None:
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), eos_token="<|endoftext|>",
                                      bos_token="<|endoftext|>", unk_token="<|endoftext|>")
        tok.save_pretrained(str(path))


def sample_batch(arrays: list[np.ndarray], probs: np.ndarray, rng: np.random.Generator, batch: int, ctx: int):
    """`batch` random windows of ctx+1 tokens; each window's domain is drawn from `probs`."""
    import torch

    doms = rng.choice(len(arrays), size=batch, p=probs)
    rows = []
    for d in doms:
        a = arrays[d]
        start = int(rng.integers(0, len(a) - ctx - 1))
        rows.append(a[start:start + ctx + 1])
    return torch.from_numpy(np.stack(rows).astype(np.int64)), doms


def _lr(step: int, total: int, lr: float, warmup: float) -> float:
    w = max(1, int(total * warmup))
    if step < w:
        return lr * (step + 1) / w
    p = (step - w) / max(1, total - w)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def token_losses(model, x):
    """Per-token next-token NLL, shape (B, ctx)."""
    import torch.nn.functional as F

    logits = model(input_ids=x[:, :-1]).logits
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), reduction="none").view(x.size(0), -1)


def train(model, arrays: list[np.ndarray], weights, n_tokens: int, hp: dict, seed: int, doremi_ref=None,
          log_every: int = 10, tag: str = "train") -> dict:
    """Train `model` on windows drawn with domain probabilities `weights` for about n_tokens tokens.

    With `doremi_ref` (a reference model), run DoReMi's Group-DRO proxy instead: batches are drawn from
    `weights` (the reference mixture); per-domain excess loss lambda_i = mean over the domain's tokens of
    max(loss_proxy - loss_ref, 0); alpha <- softmax(log alpha + eta lambda), alpha <- (1-c) alpha + c u;
    the proxy minimises sum_i alpha_i * (mean loss on domain i); the result is the time-averaged alpha.
    """
    import torch

    ctx, batch = int(hp["ctx"]), int(hp["batch"])
    steps = max(1, int(n_tokens) // (ctx * batch))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    probs = np.asarray(weights, dtype=np.float64)
    probs = probs / probs.sum()
    opt = torch.optim.AdamW(model.parameters(), lr=float(hp["lr"]), betas=(0.9, 0.95), weight_decay=float(hp["wd"]))
    k = len(arrays)
    if doremi_ref is not None:
        doremi_ref.eval()
        alpha = torch.full((k,), 1.0 / k, dtype=torch.float64)
        alpha_sum = torch.zeros(k, dtype=torch.float64)
        eta, c = float(hp.get("doremi_eta", 1.0)), float(hp.get("doremi_smoothing", 1e-3))
    model.train()
    curves, n_params_ = [], n_params(model)
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = _lr(step, steps, float(hp["lr"]), float(hp["warmup"]))
        x, doms = sample_batch(arrays, probs, rng, batch, ctx)
        tl = token_losses(model, x)
        if doremi_ref is None:
            loss = tl.mean()
        else:
            with torch.no_grad():
                ref = token_losses(doremi_ref, x)
                alpha, present = doremi_step(alpha, tl.detach() - ref, doms, eta, c)
                alpha_sum += alpha
            per_dom = [tl[torch.as_tensor(doms == i)].mean() * alpha[i] for i in range(k) if present[i]]
            loss = torch.stack(per_dom).sum() / alpha[present].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0 or step == steps - 1:
            curves.append({"step": step, "value": float(tl.mean().detach())})
    model.eval()
    tokens = steps * batch * ctx
    out = {"curves": curves, "tokens": tokens, "steps": steps,
           "flops": 6.0 * n_params_ * tokens + (2.0 * n_params_ * tokens if doremi_ref is not None else 0.0)}
    if doremi_ref is not None:
        out["doremi_weights"] = (alpha_sum / steps).numpy()
    return out


def doremi_step(alpha, token_excess, doms, eta: float, c: float):
    """One DoReMi domain-weight update. token_excess: (B, T) proxy minus reference per-token loss; doms: the
    domain of each window. lambda_i = mean over domain i's tokens of max(excess, 0) (0 when absent);
    alpha <- softmax(log alpha + eta lambda); alpha <- (1 - c) alpha + c / k. Returns (alpha, present)."""
    import torch

    k = len(alpha)
    excess = token_excess.clamp_min(0).mean(dim=1).double()  # per window (equal lengths: = per-token mean)
    dom_t = torch.as_tensor(np.asarray(doms))
    lam = torch.zeros(k, dtype=torch.float64)
    present = torch.zeros(k, dtype=torch.bool)
    for i in range(k):
        m = dom_t == i
        if m.any():
            lam[i] = excess[m].mean()
            present[i] = True
    alpha = torch.softmax(torch.log(alpha) + eta * lam, 0)
    return (1 - c) * alpha + c / k, present


def perplexity(model, ids: np.ndarray, ctx: int, max_windows: int, batch: int = 16) -> float:
    """exp(mean NLL) over up to max_windows evenly spaced non-overlapping windows of held-out ids."""
    import torch

    n = (len(ids) - 1) // ctx
    if n < 1:
        raise ValueError(f"held-out text too short for one window of {ctx} tokens")
    starts = np.unique(np.linspace(0, n - 1, min(n, max_windows)).round().astype(int)) * ctx
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for i in range(0, len(starts), batch):
            x = torch.from_numpy(np.stack([ids[s:s + ctx + 1] for s in starts[i:i + batch]]).astype(np.int64))
            tl = token_losses(model, x)
            total += float(tl.sum())
            count += tl.numel()
    return math.exp(total / count)


def embed_domain(model, ids: np.ndarray, n_windows: int, ctx: int, rng: np.random.Generator, batch: int = 32):
    """Chameleon's domain embedding: random windows, middle hidden state (hidden_states[len // 2], as the
    official code), mean-pooled per window, duplicates removed, averaged. Returns (x_i, forward tokens)."""
    import torch

    starts = rng.integers(0, len(ids) - ctx, size=n_windows)
    embs = []
    model.eval()
    with torch.no_grad():
        for i in range(0, n_windows, batch):
            x = torch.from_numpy(np.stack([ids[s:s + ctx] for s in starts[i:i + batch]]).astype(np.int64))
            hs = model(input_ids=x, output_hidden_states=True).hidden_states
            embs.append(hs[len(hs) // 2].mean(dim=1).double().numpy())
    E = np.unique(np.concatenate(embs), axis=0)
    return E.mean(axis=0), n_windows * ctx
