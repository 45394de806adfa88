"""The Reviewer / Validator stand-in: a small GPT-2 code LM trained in the pipeline.

Tokenizer: byte-level BPE trained on the C++ corpus (tokenizers). Model: `GPT2LMHeadModel`, pre-trained
as an LM on the training part of the corpus, then fine-tuned on training MRs only:
* review prompts  `<|review|>` + line-aware slice + `<|out|>` -> `+<line>|<category>|q1 q2 q3` lines
  (the key bug with high scores, an occasional nitpick on a benign changed line with low scores) or `none`;
* validate prompts `<|validate|>` + snippet + `<|cand|>+<line>|<category>` + `<|out|>` -> `q1 q2 q3`.
`Engine` is the generate(prompt) interface that a chat LLM served through vLLM implements at full scale
(`VLLMEngine` in engines.py); N reviewers are N samples at temperature T; the validator decodes greedily.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

SPECIAL = ["<|pad|>", "<|review|>", "<|validate|>", "<|cand|>", "<|out|>", "<|end|>"]
COMMENT_RE = re.compile(r"([ +-])(\d+)\|([a-z]+)\|([1-7]) ([1-7]) ([1-7])")
SCORE_RE = re.compile(r"([1-7]) ([1-7]) ([1-7])")


def review_prompt(snippet: str) -> str:
    return f"<|review|>\n{snippet}\n<|out|>\n"


def comment(line: int, mark: str, category: str, q) -> str:
    """One comment line: the line's marker as it appears in the line-aware format, then category and scores."""
    return f"{mark}{line}|{category}|{q[0]} {q[1]} {q[2]}"


def validate_prompt(snippet: str, line: int, category: str, mark: str = "+") -> str:
    return f"<|validate|>\n{snippet}\n<|cand|>{mark}{line}|{category}\n<|out|>\n"


def parse_review(text: str) -> list[tuple[int, str, int, int, int]]:
    return [(int(m[1]), m[2], int(m[3]), int(m[4]), int(m[5])) for m in COMMENT_RE.findall(text)]


def parse_scores(text: str) -> tuple[int, int, int]:
    m = SCORE_RE.search(text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else (1, 1, 1)


def train_tokenizer(texts: list[str], vocab: int, out: Path, max_line: int = 0):
    """Byte-level BPE on the corpus; each line marker of the line-aware format (` N|`, `+N|` for new-file
    lines N <= max_line; deleted lines' `-N|` stay BPE) is one added token, so that a comment can name a line by copying one token (a tiny LM
    trained for minutes does not learn to copy multi-token numbers; a chat LLM needs no such help)."""
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=vocab, min_frequency=2, special_tokens=SPECIAL, show_progress=False)
    if max_line:
        tok.add_tokens([f"{m}{n}|" for m in " +" for n in range(1, max_line + 1)])
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    return load_tokenizer(out)


def load_tokenizer(d: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(d) / "tokenizer.json"))


def marker_mask(tok):
    """[vocab] bool: the line-marker tokens (` N|`, `+N|`) added by `train_tokenizer`."""
    import torch

    mask = torch.zeros(tok.get_vocab_size(), dtype=torch.bool)
    for i, added in tok.get_added_tokens_decoder().items():
        c = added.content
        if len(c) > 2 and c[0] in " +" and c.endswith("|") and c[1:-1].isdigit():
            mask[i] = True
    return mask


def init_markers(model, tok, max_line: int, seed: int = 0) -> None:
    """Structured embeddings for the marker tokens: one shared vector per mark (` `, `+`) plus a sinusoidal
    code of the line number, so that the ~6000 markers, each seen a few times in training, share what the
    model learns about "a changed line's marker" and neighbouring lines lie close (issue 57)."""
    import torch

    w = model.transformer.wte.weight
    d, std = w.shape[1], 0.02
    g = torch.Generator().manual_seed(seed)
    half = d // 2
    freqs = torch.tensor([10000.0 ** (-i / half) for i in range(half)])
    with torch.no_grad():
        for m in " +":
            mark = torch.randn(d, generator=g) * std
            for n in range(1, max_line + 1):
                ang = n * freqs
                w[tok.token_to_id(f"{m}{n}|")] = mark + std * torch.cat([torch.sin(ang), torch.cos(ang)])


def shown_markers(ids, prompt_rows, mask):
    """[rows, vocab] float: 1 for each marker token present in the row's prompt positions."""
    import torch

    out = torch.zeros(ids.shape[0], mask.shape[0])
    for r in range(ids.shape[0]):
        out[r, ids[r][prompt_rows[r]]] = 1.0
    return out * mask


def build_model(tok, m: dict):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=int(m["context"]), n_embd=int(m["d_model"]),
                     n_layer=int(m["layers"]), n_head=int(m["heads"]), resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, bos_token_id=tok.token_to_id("<|end|>"), eos_token_id=tok.token_to_id("<|end|>"),
                     pad_token_id=tok.token_to_id("<|pad|>"))
    return GPT2LMHeadModel(cfg)


def _batches(rows, batch, steps, rng):
    for _ in range(steps):
        yield [rows[rng.randrange(len(rows))] for _ in range(batch)]


def _step(model, opt, seqs, pad, ctx, copy=None):
    """One AdamW step on the labelled positions. The LM head runs on those positions only (a fine-tuning
    target is ~10 tokens after a ~200-token prompt; full-vocabulary logits at every position were ~3/4 of
    the step's cost). copy = (bias, marker mask): the copy prior adds the learned scalar `bias` to the
    logits of the marker tokens shown in the example's prompt (see `finetune`)."""
    import torch

    n = max(len(s[0]) for s in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    labels = torch.full((len(seqs), n), -100, dtype=torch.long)
    att = torch.zeros((len(seqs), n), dtype=torch.long)
    prompt = torch.zeros((len(seqs), n), dtype=torch.bool)
    for r, (x, mask) in enumerate(seqs):
        ids[r, :len(x)] = torch.as_tensor(x)
        att[r, :len(x)] = 1
        lab_mask = torch.as_tensor(mask, dtype=torch.bool)
        prompt[r, :len(x)] = ~lab_mask
        lab = torch.as_tensor(x)
        lab[~lab_mask] = -100
        labels[r, :len(x)] = lab
    h = model.transformer(input_ids=ids, attention_mask=att).last_hidden_state[:, :-1]
    y = labels[:, 1:]
    sel = y != -100
    logits = model.lm_head(h[sel])
    if copy is not None:
        bias, mmask = copy
        rows = torch.arange(len(seqs)).unsqueeze(1).expand_as(y)[sel]
        logits = logits + bias * shown_markers(ids, prompt, mmask)[rows]
    loss = torch.nn.functional.cross_entropy(logits, y[sel])
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss.detach())


def pretrain(model, tok, texts: list[str], t: dict, seed: int) -> list[float]:
    """Causal LM on random windows of the corpus token stream."""
    import torch

    ctx = int(t["pre_seq"])
    stream = []
    for s in texts:
        stream += tok.encode(s).ids
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=float(t["pre_lr"]), weight_decay=0.0)
    pad = tok.token_to_id("<|pad|>")
    losses = []
    model.train()
    for _ in range(int(t["pre_steps"])):
        seqs = []
        for _ in range(int(t["batch"])):
            a = rng.randrange(max(1, len(stream) - ctx))
            x = stream[a:a + ctx]
            seqs.append((x, [1] * len(x)))
        losses.append(_step(model, opt, seqs, pad, ctx))
    return losses


def encode_example(tok, prompt: str, target: str, ctx: int):
    p, tgt = tok.encode(prompt).ids, tok.encode(target).ids
    p = p[-(ctx - len(tgt)):] if len(p) + len(tgt) > ctx else p
    return p + tgt, [0] * len(p) + [1] * len(tgt)


def finetune(model, tok, examples: list[tuple[str, str]], t: dict, seed: int, ctx: int,
             copy_init: float = 0.0) -> tuple[list[float], float]:
    """Fine-tune on (prompt, target) pairs; returns the losses and the learned copy bias.

    Copy prior (issue 57, our construction): naming a line means emitting one of the marker tokens the
    prompt shows. A 2-layer d=64 LM trained for minutes did not learn to copy them (it emitted markers it
    had memorised from training MRs: LSR 0, KBI 0), so the marker logits of the tokens present in the
    prompt get a learned scalar bias, started at `copy_init` (a pointer-style copy term; a chat LLM copies
    line numbers unaided). Which shown line to name is still the LM's choice, and a prompt without line
    numbers (the `none` format) shows no marker, so the bias does nothing there."""
    import torch

    rows = [encode_example(tok, p, q, ctx) for p, q in examples]
    rng = random.Random(seed)
    bias = torch.nn.Parameter(torch.tensor(float(copy_init)))
    params = list(model.parameters()) + ([bias] if copy_init else [])
    opt = torch.optim.AdamW(params, lr=float(t["ft_lr"]), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.05, 1.0 - s / max(1, int(t["ft_steps"]))))
    pad = tok.token_to_id("<|pad|>")
    copy = (bias, marker_mask(tok)) if copy_init else None
    losses = []
    model.train()
    for seqs in _batches(rows, int(t["batch"]), int(t["ft_steps"]), rng):
        losses.append(_step(model, opt, seqs, pad, ctx, copy))
        sched.step()
    return losses, float(bias.detach())


class _CopyPrior:
    """generate()'s logits processor for the copy prior: + bias on the marker tokens of the prompt. The prompt
    does not change while decoding, so the addend is built once: `prompt_ids` [prompts, width], each row
    repeated n times as generate() expands num_return_sequences (repeat_interleave)."""

    def __init__(self, prompt_ids, n: int, bias: float, mask):
        shown = shown_markers(prompt_ids, prompt_ids >= 0, mask.float())
        self.add = bias * shown.repeat_interleave(n, dim=0)

    def __call__(self, input_ids, scores):
        return scores + self.add


class Engine:
    """generate(prompt, n, temperature, seed) -> n completions; the interface every reviewer LLM serves."""

    def __init__(self, model_dir: Path, max_new: int = 48):
        import torch
        from transformers import GPT2LMHeadModel

        self.tok = load_tokenizer(model_dir)
        self.model = GPT2LMHeadModel.from_pretrained(str(model_dir)).eval()
        self.end = self.tok.token_to_id("<|end|>")
        self.ctx = self.model.config.n_positions
        self.max_new = max_new
        self.torch = torch
        meta = Path(model_dir) / "reviewer_meta.json"
        self.copy_bias = float(json.loads(meta.read_text()).get("copy_bias", 0.0)) if meta.exists() else 0.0
        self.markers = marker_mask(self.tok)
        self.markers[self.tok.token_to_id("<|pad|>")] = False

    def n_tokens(self, text: str) -> int:
        return len(self.tok.encode(text).ids)

    def generate(self, prompt: str, n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[str]:
        return self.generate_batch([prompt], n, temperature, seed)[0]

    def generate_batch(self, prompts: list[str], n: int = 1, temperature: float = 0.0, seed: int = 0) -> list[list[str]]:
        """n completions of each prompt, in one left-padded batch (one decoding loop for the whole MR)."""
        torch = self.torch
        if not prompts:
            return []
        ids = [self.tok.encode(p).ids[-(self.ctx - self.max_new):] for p in prompts]
        width = max(len(x) for x in ids)
        pad = self.tok.token_to_id("<|pad|>")
        x = torch.full((len(ids), width), pad, dtype=torch.long)
        att = torch.zeros_like(x)
        for i, row in enumerate(ids):
            x[i, width - len(row):] = torch.as_tensor(row)
            att[i, width - len(row):] = 1
        torch.manual_seed(seed)
        from transformers import LogitsProcessorList

        procs = LogitsProcessorList([_CopyPrior(x, n, self.copy_bias, self.markers)] if self.copy_bias else [])
        with torch.no_grad():
            kw = dict(do_sample=True, temperature=temperature, top_k=0) if temperature > 0 else dict(do_sample=False)
            out = self.model.generate(x, attention_mask=att, max_new_tokens=self.max_new, num_return_sequences=n,
                                      eos_token_id=self.end, pad_token_id=pad, logits_processor=procs, **kw)
        texts = [self.tok.decode(o[width:].tolist(), skip_special_tokens=False).split("<|end|>")[0] for o in out]
        return [texts[i * n:(i + 1) * n] for i in range(len(prompts))]


def save(model, tok_dir: Path, out: Path, meta: dict) -> None:
    model.save_pretrained(str(out))
    (out / "reviewer_meta.json").write_text(json.dumps(meta, indent=1))
