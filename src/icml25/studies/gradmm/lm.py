"""The language model: a byte-level BPE tokenizer and a tiny GPT-2 trained here (mini / smoke), or a Hub
checkpoint (full: microsoft/phi-1_5), both loaded through `AutoModelForCausalLM.from_pretrained`.

Task format (the official template): "<text> It was" -> next token " great" (1) / " bad" (0); the
classifier score of a text is the pair of label-token logits at the last position.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from icml25.core.runtime import device_of  # noqa: F401 (the stages' lm.device_of)

EOS = "<|endoftext|>"


def quiet() -> None:
    import warnings

    from icml25.core import hf

    hf.quiet()
    # transformers 5.24 renames the KV-cache argument (past_key_values -> cache) with a FutureWarning per call
    warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)


# ---- tokenizer --------------------------------------------------------------------------------------

def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path, must_have: list[str]):
    """Byte-level BPE on `texts`, wrapped as a PreTrainedTokenizerFast (the tokenizer.json route: with
    transformers 5 the vocab/merges constructor builds an empty tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab_size), special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    # the label words and the prompt must be single tokens (the official code uses the first token of a
    # multi-token label; with our own vocabulary we make sure there is only one)
    missing = [w for w in must_have if len(tok.encode(w).ids) != 1]
    if missing:
        tok.add_tokens(missing)
    path = Path(out_dir) / "tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=EOS, bos_token=EOS, unk_token=EOS,
                                   pad_token=EOS)


def build_model(mcfg: dict, vocab_size: int, seed: int):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    quiet()
    torch.manual_seed(seed)
    # untied lm_head, as phi-1.5: the matched gradient is of lm_head alone, not of the input embeddings
    cfg = GPT2Config(vocab_size=int(vocab_size), n_positions=int(mcfg["ctx"]), n_embd=int(mcfg["d_model"]),
                     n_layer=int(mcfg["n_layer"]), n_head=int(mcfg["n_head"]), resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False)
    return GPT2LMHeadModel(cfg)


def model_device(model):
    return next(model.parameters()).device


def load(path_or_id: str | Path, device="cpu"):
    """Model (on `device`) and tokenizer by local directory (what fit_base saved) or Hub id: the same call
    either way."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet()
    model = AutoModelForCausalLM.from_pretrained(str(path_or_id), dtype=torch.float32).to(device)
    tok = AutoTokenizer.from_pretrained(str(path_or_id))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.eval()
    return model, tok


def save(model, tok, path: Path) -> None:
    """Saved from the host, so that a checkpoint trained on a GPU loads anywhere."""
    model.to("cpu").save_pretrained(str(path))
    tok.save_pretrained(str(path))


def n_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def pretrain(model, ids: np.ndarray, steps: int, batch: int, ctx: int, lr: float, seed: int, log_every: int = 20):
    """Next-token training on random windows of the token stream; AdamW, warm-up + cosine."""
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    dev = model_device(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    warm = max(1, steps // 20)
    model.train()
    curve = []
    for step in range(steps):
        f = (step + 1) / warm if step < warm else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))
        for g in opt.param_groups:
            g["lr"] = lr * f
        starts = rng.integers(0, len(ids) - ctx - 1, size=batch)
        x = torch.from_numpy(np.stack([ids[s:s + ctx + 1] for s in starts]).astype(np.int64)).to(dev)
        logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0 or step == steps - 1:
            curve.append((step, float(loss.detach())))
    model.eval()
    return curve


# ---- task helpers -----------------------------------------------------------------------------------

class Task:
    """Token ids of the prompt and the two label words for one tokenizer."""

    def __init__(self, tok, prompt: str, labels: dict):
        self.tok = tok
        self.prompt = prompt
        self.prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        self.label_words = {int(k): v for k, v in labels.items()}
        self.label_ids = {}
        for k, w in self.label_words.items():
            ids = tok(w, add_special_tokens=False)["input_ids"]
            self.label_ids[k] = ids[0]  # first token of the label word (as the official compute_grads_lm)
        if self.label_ids[0] == self.label_ids[1]:
            raise ValueError("the two label words share their first token")
        self.eos = tok.eos_token_id

    def encode(self, text: str, max_text_tokens: int | None = None) -> list[int]:
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        if max_text_tokens is not None:
            ids = ids[:max_text_tokens]
        return ids + self.prompt_ids

    def text_ids(self, text: str, max_text_tokens: int | None = None) -> list[int]:
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        return ids if max_text_tokens is None else ids[:max_text_tokens]


def pad_left(seqs: list[list[int]], pad: int, device=None):
    """Left-padded id batch and attention mask (the last position is every sequence's last token), built on
    the host and moved to `device`."""
    import torch

    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, n - len(s):] = torch.tensor(s)
        mask[i, n - len(s):] = 1
    return (ids, mask) if device is None else (ids.to(device), mask.to(device))


def label_logits(model, task: Task, seqs: list[list[int]]):
    """(B, 2) logits of [bad, great] at the last position of each (left-padded) sequence."""
    ids, mask = pad_left(seqs, task.eos, model_device(model))
    pos = (mask.cumsum(1) - 1).clamp_min(0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1, :]
    return out[:, [task.label_ids[0], task.label_ids[1]]]


def classify(model, task: Task, texts: list[str], max_text_tokens: int, batch: int = 64) -> np.ndarray:
    """Score great - bad per text (the zero-shot / fine-tuned classifier's margin)."""
    import torch

    out = []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(texts), batch):
            seqs = [task.encode(t, max_text_tokens) for t in texts[i:i + batch]]
            lg = label_logits(model, task, seqs)
            out.append((lg[:, 1] - lg[:, 0]).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def finetune_classifier(model, task: Task, examples: list[dict], steps: int, batch: int, lr: float, seed: int,
                        max_text_tokens: int, log_every: int = 10):
    """Full fine-tuning as a classifier (the official train_as_classification): cross-entropy over the two
    label tokens' logits at the last position; AdamW, linear decay, batches drawn epoch by epoch."""
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    seqs = [task.encode(e["text"], max_text_tokens) for e in examples]
    ys = torch.tensor([int(e["label"]) for e in examples], device=model_device(model))
    order, pos, curve = rng.permutation(len(seqs)), 0, []
    model.train()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr * (1 - step / steps)
        if pos + batch > len(order):
            order, pos = rng.permutation(len(seqs)), 0
        idx = order[pos:pos + batch]
        pos += batch
        lg = label_logits(model, task, [seqs[i] for i in idx])
        loss = F.cross_entropy(lg, ys[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % log_every == 0 or step == steps - 1:
            curve.append((step, float(loss.detach())))
    model.eval()
    return curve


def sequence_nll(model, seqs: list[list[int]], prefix: list[int]) -> np.ndarray:
    """Mean next-token NLL (nats) of each sequence's own tokens given `prefix` (e.g. [eos])."""
    import torch
    import torch.nn.functional as F

    out = []
    model.eval()
    with torch.no_grad():
        for s in seqs:
            x = torch.tensor([list(prefix) + list(s)], device=model_device(model))
            logits = model(input_ids=x[:, :-1]).logits[0]
            tgt = x[0, 1:]
            nll = F.cross_entropy(logits, tgt, reduction="none")[len(prefix) - 1:]
            out.append(float(nll.mean()))
    return np.asarray(out)
