"""The language model side: tokenizer, base model (fit or loaded with from_pretrained), QA encoding,
token losses, Extraction Strength (ES) and parameter interpolation."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from icml25.core import hf

SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
quiet_hf = hf.quiet  # the shared HF helpers, under the names this study uses
device = hf.device


# ---- tokenizer and prompt ------------------------------------------------------------------------------

def build_word_tokenizer(texts: list[str]):
    """Word-level `tokenizers` tokenizer over every word of the data, as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for t in texts for w in t.split()} - set(SPECIALS))
    vocab = {w: i for i, w in enumerate(SPECIALS + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="[BOS]", eos_token="[EOS]", pad_token="[PAD]",
                                   unk_token="[UNK]")


def all_texts(splits: dict, prompt: dict) -> list[str]:
    out = [prompt["question_start"], prompt["question_end"], prompt["answer_tag"]]
    for items in splits.values():
        for it in items:
            out += [it["question"], it["para_question"], it["answer"], *it["perturbed"]]
    return out


def prompt_text(tok, question: str, prompt: dict) -> str:
    bos = f"{tok.bos_token} " if prompt.get("bos", True) and tok.bos_token else ""
    return f"{bos}{prompt['question_start']}{question}{prompt['question_end']}{prompt['answer_tag']}"


def _answer_mask(tok, answer: str, ids: list[int], item: dict) -> list[int]:
    """Importance flags of the answer tokens: the exact word flags when the tokenizer is word-level (one
    token per word), else SatImp's rule for its TOFU annotations: a token is important when its ASCII text
    (>= 2 characters or numeric) occurs in the annotated critical words."""
    flags = item.get("fact_flags")
    if flags is not None and len(flags) == len(ids):
        return list(flags)
    crit = item.get("critical") or ""
    out = []
    for t in tok.convert_ids_to_tokens(ids):
        s = "".join(ch for ch in t if ch.isascii() and ch.isalnum())
        out.append(int(bool(s) and (len(s) >= 2 or s.isnumeric()) and s in crit.replace(" ", "")))
    return out


def encode(tok, items: list[dict], prompt: dict, question_key: str = "question", answer_key: str = "answer",
           eos: bool = True):
    """Right-padded ids, labels (-100 on prompt and padding), attention mask, importance mask (on labels) and
    the answer length (without EOS) of each item. The answer is tokenised after a space, separately from
    the prompt, so the split point is exact for every tokenizer."""
    import torch

    seqs, labs, imps, alen = [], [], [], []
    for it in items:
        p = tok(prompt_text(tok, it[question_key], prompt), add_special_tokens=False)["input_ids"]
        ans = it[answer_key]
        a = tok(" " + ans, add_special_tokens=False)["input_ids"]
        m = _answer_mask(tok, ans, a, it)
        e = [tok.eos_token_id] if eos and tok.eos_token_id is not None else []
        seqs.append(p + a + e)
        labs.append([-100] * len(p) + a + e)
        imps.append([0] * len(p) + m + [0] * len(e))
        alen.append(len(a))
    n = max(len(s) for s in seqs)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    labels = torch.full((len(seqs), n), -100, dtype=torch.long)
    att = torch.zeros((len(seqs), n), dtype=torch.long)
    imp = torch.zeros((len(seqs), n), dtype=torch.float32)
    for i, (s, l, m) in enumerate(zip(seqs, labs, imps)):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, : len(l)] = torch.tensor(l)
        att[i, : len(s)] = 1
        imp[i, : len(m)] = torch.tensor(m, dtype=torch.float32)
    return {"input_ids": ids, "labels": labels, "attention_mask": att, "importance": imp,
            "answer_len": torch.tensor(alen)}


def batch_slice(enc: dict, idx) -> dict:
    return {k: v[idx] for k, v in enc.items()}


def token_losses(model, batch: dict):
    """Per-token NLL l = -log p(a_t | q, a_<t) on the shifted labels: (losses [B, T-1], mask [B, T-1],
    importance [B, T-1]); masked positions have loss 0."""
    import torch.nn.functional as F

    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    logits = out.logits[:, :-1, :].float()
    labels = batch["labels"][:, 1:]
    mask = labels != -100
    l = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.clamp(min=0).reshape(-1),
                        reduction="none").view(labels.shape)
    return l * mask, mask, batch["importance"][:, 1:]


# ---- base model ---------------------------------------------------------------------------------------

def new_llama(tok, mcfg: dict):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=int(mcfg["hidden"]), intermediate_size=int(mcfg["ffn"]),
                      num_hidden_layers=int(mcfg["layers"]), num_attention_heads=int(mcfg["heads"]),
                      num_key_value_heads=int(mcfg["heads"]), max_position_embeddings=int(mcfg.get("max_len", 64)),
                      tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    return LlamaForCausalLM(cfg)


def fit(model, enc: dict, steps: int, batch_size: int, lr: float, seed: int, warmup: int = 0,
        weight_decay: float = 0.0, log_every: int = 50) -> list[tuple[int, float]]:
    """AdamW on next-token NLL of the answers, minibatches drawn by epoch permutation, linear warmup then
    cosine decay. Returns (step, loss) pairs."""
    import math

    import torch

    model.train()
    dev = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, warmup)) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / max(1, steps)))))
    g = torch.Generator().manual_seed(seed)
    n = enc["input_ids"].shape[0]
    perm, pos, log = torch.randperm(n, generator=g), 0, []
    for step in range(steps):
        if pos + batch_size > n:
            perm, pos = torch.randperm(n, generator=g), 0
        b = {k: v.to(dev) for k, v in batch_slice(enc, perm[pos:pos + batch_size]).items()}
        pos += batch_size
        l, m, _ = token_losses(model, b)
        loss = l.sum() / m.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps - 1:
            log.append((step, float(loss.detach())))
    model.eval()
    return log


def load_base(base_dir: Path):
    """(model, tokenizer, record) through AutoModelForCausalLM / AutoTokenizer.from_pretrained: the model the
    base stage saved (mini) or fine-tuned from a Hub id (full), the same call either way."""
    quiet_hf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rec = json.loads((Path(base_dir) / "base.json").read_text())
    path = str(Path(base_dir) / rec["model_path"])
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = getattr(torch, rec.get("dtype", "float32"))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device())
    model.eval()
    return model, tok, rec


# ---- Extraction Strength ---------------------------------------------------------------------------------

def es_scores(model, enc: dict, batch_size: int = 256) -> np.ndarray:
    """Extraction Strength by teacher forcing: the share of the answer, counted from its end, that greedy
    decoding reproduces. ES = 1 - min{k : greedy(q, a_<k) = a_>=k} / |a| equals (length of the longest suffix
    of answer tokens whose teacher-forced argmax is right) / |a| (SatImp's eval_es.py)."""
    import torch

    dev = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for s in range(0, enc["input_ids"].shape[0], batch_size):
            b = {k: v[s:s + batch_size].to(dev) for k, v in enc.items()}
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1]
            pred = logits.argmax(-1)
            labels = b["labels"][:, 1:]
            for i in range(labels.shape[0]):
                pos = torch.nonzero(labels[i] != -100).flatten()[: int(b["answer_len"][i])]
                ok = (pred[i, pos] == labels[i, pos]).flip(0).long()
                suffix = int(ok.cumprod(0).sum())
                out.append(suffix / max(1, len(pos)))
    return np.asarray(out)


def es_greedy(model, tok, item: dict, prompt: dict, question_key: str = "question") -> float:
    """ES by its definition with greedy decoding (slow; for tests): the smallest answer prefix k after which
    greedy decoding of |a| - k tokens reproduces the rest of the answer."""
    import torch

    dev = next(model.parameters()).device
    p = tok(prompt_text(tok, item[question_key], prompt), add_special_tokens=False)["input_ids"]
    a = tok(" " + item["answer"], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        for k in range(len(a) + 1):
            ctx = list(p + a[:k])
            for _ in range(len(a) - k):
                x = torch.tensor([ctx], device=dev)
                ctx.append(int(model(input_ids=x).logits[0, -1].argmax()))
            if ctx[len(p) + k:] == a[k:]:
                return 1.0 - k / len(a)
    return 0.0


def token_probs(model, enc: dict, batch_size: int = 256):
    """p = exp(-l) of every answer token (EOS excluded) and its importance flag, flattened."""
    import torch

    dev = next(model.parameters()).device
    ps, imps = [], []
    with torch.no_grad():
        for s in range(0, enc["input_ids"].shape[0], batch_size):
            b = {k: v[s:s + batch_size].to(dev) for k, v in enc.items()}
            l, m, imp = token_losses(model, b)
            for i in range(l.shape[0]):
                pos = torch.nonzero(m[i]).flatten()[: int(b["answer_len"][i])]
                ps.append(torch.exp(-l[i, pos]).cpu())
                imps.append(imp[i, pos].cpu())
    return torch.cat(ps).numpy(), torch.cat(imps).numpy()


def token_errors(model, enc: dict, batch_size: int = 256) -> tuple[float, float]:
    """Teacher-forced argmax error rate on the answer tokens (EOS excluded): (on annotated fact tokens, on
    the other, template tokens). Where the retain errors sit after unlearning."""
    import torch

    dev = next(model.parameters()).device
    wrong, imps = [], []
    with torch.no_grad():
        for s in range(0, enc["input_ids"].shape[0], batch_size):
            b = {k: v[s:s + batch_size].to(dev) for k, v in enc.items()}
            pred = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1].argmax(-1)
            labels, imp = b["labels"][:, 1:], b["importance"][:, 1:]
            for i in range(labels.shape[0]):
                pos = torch.nonzero(labels[i] != -100).flatten()[: int(b["answer_len"][i])]
                wrong.append((pred[i, pos] != labels[i, pos]).float().cpu())
                imps.append(imp[i, pos].cpu())
    w, m = torch.cat(wrong), torch.cat(imps) > 0
    fact = float(w[m].mean()) if m.any() else float("nan")
    tmpl = float(w[~m].mean()) if (~m).any() else float("nan")
    return fact, tmpl


# ---- interpolation ---------------------------------------------------------------------------------------

def interpolate(model, orig: dict, unl: dict, alpha: float) -> None:
    """theta = orig + alpha (unlearned - orig): alpha 1 is the unlearned model, 0 the original."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(orig[name] + alpha * (unl[name] - orig[name]))
