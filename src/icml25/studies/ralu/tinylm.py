"""The mini-scale stand-in LLM: a small GPT-2 trained in the pipeline on gsm-lite text for RaLU's three roles.

(P) question -> program; (J) judge turns: a gold unit -> "OK Analysis: ...", a corrupted unit (operator swap,
wrong constant, off-by-one bound, negated condition) -> "WRONG <Fix>gold unit</Fix> Analysis: ..."; units
come from every unit source the methods use (CFG units, program lines, the whole program), in equal
shares, so the ablations are not handicapped by an unseen unit format; (S) question + reasoning path ->
final program. The judge is *trained* to recognise these corruptions: a gain of RaLU over PoT shows the
value of unit-level verification and the pipeline's mechanics, not an LLM's emergent self-verification.

Tokenizer: a word-level `tokenizers` model (words, single digits, symbols, newlines and 4-space indents,
a leading space kept in the token) with a `Fuse` decoder, wrapped as `PreTrainedTokenizerFast` and saved
with the model (`save_pretrained`) so evaluation loads both with `from_pretrained(dir)`.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

from . import gsm_lite
from .llm import ANSWER, EOS, PAD, TAGS, UNIT, UNK, render_prompt
from .units import SOURCES

PATTERN = r"\n|    | ?[A-Za-z_]+| ?\d| ?[^\sA-Za-z_\d]| "
SPECIALS = [PAD, EOS, UNK, UNIT, ANSWER, *TAGS.values(), "<Fix>", "</Fix>"]


def judge_reply(gold_unit: str, shown: str, kind: str | None) -> str:
    if kind is None:
        return "OK Analysis: the unit follows the question ."
    return f"WRONG <Fix>{gold_unit}</Fix> Analysis: {kind} error ."


def examples(items: list[dict], seed: int, judge_per_item: int = 3, p_corrupt: float = 0.5) -> list[tuple[str, str]]:
    """(prompt, response) pairs for the three roles."""
    rng = random.Random(seed)
    out = []
    for it in items:
        q, prog = it["question"], it["program"]
        out.append((render_prompt("program", {"question": q}), prog))
        for _ in range(judge_per_item):
            src = rng.choice(["cfg", "cfg", "line", "whole"])
            units = SOURCES[src](prog)
            gold = rng.choice(units)
            kind = None
            shown = gold
            if rng.random() < p_corrupt:
                c = gsm_lite.corrupt(gold, rng)
                if c is not None:
                    shown, kind = c
            out.append((render_prompt("judge", {"question": q, "unit": shown}), judge_reply(gold, shown, kind)))
        src = rng.choice(["cfg", "line"])
        out.append((render_prompt("synth", {"question": q, "path": SOURCES[src](prog)}), prog))
    rng.shuffle(out)
    return out


def build_tokenizer(texts: list[str], out_dir: Path | None = None):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pre = pre_tokenizers.Split(Regex(PATTERN), behavior="isolated")
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    probe = Tokenizer(models.WordLevel({UNK: 0}, unk_token=UNK))
    probe.pre_tokenizer = pre
    for text in texts:
        for piece, _ in pre.pre_tokenize_str(text):
            if piece not in vocab:
                vocab[piece] = len(vocab)
    for d in "0123456789":  # every digit, with and without a leading space
        for p in (d, " " + d):
            vocab.setdefault(p, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=UNK, pad_token=PAD, eos_token=EOS)
    if out_dir is not None:
        fast.save_pretrained(str(out_dir))
    return fast


def batch_backward(model, batch: list, pad: int, micro: int = 1) -> tuple[float, int]:
    """Backpropagate the batch's mean response-token loss; return (that loss, its token count).

    The batch is sorted by length and cut into `micro` groups, each padded only to its own longest example:
    the three roles' examples differ about 2x in length (a synthesis prompt holds the question and the whole
    path), so one padded tensor spent about half its compute on padding. Each group's summed loss is divided
    by the batch's token count, so the accumulated gradient is the one of the whole batch (the same examples
    in every step; sorting only the groups, never which examples a step sees, keeps the batches mixed)."""
    import torch

    batch = sorted(batch, key=lambda b: len(b[0]))
    n_total = sum(len(ids) - np_ for ids, np_ in batch)
    k = max(1, min(int(micro), len(batch)))
    bounds = [round(i * len(batch) / k) for i in range(k + 1)]
    total = 0.0
    for lo, hi in zip(bounds, bounds[1:]):
        group = batch[lo:hi]
        L = max(len(ids) for ids, _ in group)
        x = torch.full((len(group), L), pad, dtype=torch.long)
        y = torch.full((len(group), L), -100, dtype=torch.long)
        for j, (ids, np_) in enumerate(group):
            x[j, :len(ids)] = torch.tensor(ids)
            y[j, np_:len(ids)] = torch.tensor(ids[np_:])  # loss on the response only
        logits = model(input_ids=x).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y[:, 1:].reshape(-1),
                                                 ignore_index=-100, reduction="sum") / n_total
        loss.backward()
        total += float(loss.detach())
    return total, n_total


def train_lm(items: list[dict], cfg: dict, seed: int, out_dir: Path) -> dict:
    """Train the tiny GPT-2 for `cfg['lm']['steps']` steps; save model + tokenizer; return its curve."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from icml25.core import hf

    hf.quiet()
    lm = cfg["lm"]
    torch.manual_seed(seed)
    pairs = examples(items, seed, int(lm["judge_per_item"]), float(lm["p_corrupt"]))
    tok = build_tokenizer([p + r for p, r in pairs], out_dir)
    eos = tok.convert_tokens_to_ids(EOS)
    n_ctx = int(lm["n_ctx"])
    data = []
    for p, r in pairs:
        a = tok(p, add_special_tokens=False)["input_ids"]
        b = tok(r, add_special_tokens=False)["input_ids"] + [eos]
        ids = (a + b)[:n_ctx]
        data.append((ids, min(len(a), len(ids))))
    conf = GPT2Config(vocab_size=len(tok), n_positions=n_ctx, n_embd=int(lm["n_embd"]), n_layer=int(lm["n_layer"]),
                      n_head=int(lm["n_head"]), bos_token_id=eos, eos_token_id=eos,
                      pad_token_id=tok.convert_tokens_to_ids(PAD), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(conf)
    opt = torch.optim.AdamW(model.parameters(), lr=float(lm["lr"]), weight_decay=0.01)
    steps, bs = int(lm["steps"]), int(lm["batch"])
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=float(lm["lr"]), total_steps=max(steps, 1),
                                                pct_start=0.1)
    rng = random.Random(seed)
    curve, cpu0, n_tok = [], time.process_time(), 0
    model.train()
    for step in range(steps):
        batch = [data[rng.randrange(len(data))] for _ in range(bs)]
        opt.zero_grad()
        loss, n = batch_backward(model, batch, conf.pad_token_id, int(lm.get("micro", 1)))
        n_tok += n
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 20 == 0 or step == steps - 1:
            curve.append((step, loss))
    model.eval()
    model.save_pretrained(str(out_dir))
    return {"curve": curve, "cpu_s": time.process_time() - cpu0, "n_params": sum(p.numel() for p in model.parameters()),
            "n_examples": len(pairs), "response_tokens": n_tok, "vocab": len(tok)}
