"""Data: the offline corpus (CPython stdlib sources + pydoc_data topics) and a BPE tokenizer trained on it
(mini, smoke), or PG-19 test books and the model's own tokenizer (full).

Written by preprocess:
  tokenizer/         an HF tokenizer directory (PreTrainedTokenizerFast; the model's own at full)
  train_tokens.npy   the LM / head training stream (mini, smoke)
  prompts.npy        [n_prompts, prompt_len] held-out prompts (files never trained on / PG-19 test books)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError


def stdlib_files() -> list[Path]:
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    skip = ("test", "tests", "idlelib", "site-packages", "lib2to3", "turtledemo", "ensurepip")
    files = [p for p in root.rglob("*.py") if not any(part in skip for part in p.relative_to(root).parts)]
    return sorted(files, key=lambda p: str(p.relative_to(root)))


def download(cfg: dict, raw_dir: Path) -> None:
    d = cfg["data"]
    if d["source"] == "stdlib":
        files = stdlib_files()
        (raw_dir / "SOURCE.txt").write_text(
            f"tokenswift: corpus = CPython {sys.version.split()[0]} stdlib *.py ({len(files)} files, tests excluded) "
            "+ pydoc_data.topics, read from the interpreter in preprocess (nothing downloaded)\n")
        return
    if d["source"] == "pg19":
        from icml25.core.download import fetch

        fetch(d["url"], raw_dir / d["file"], d.get("sha256"))
        return
    raise UserError(f"tokenswift: unknown data.source {d['source']!r} (stdlib | pg19)")


def _corpus(d: dict) -> tuple[str, list[str]]:
    """(training text, held-out documents): every `holdout_every`-th file is held out for prompts."""
    from pydoc_data.topics import topics

    files = stdlib_files()
    train, held = [], []
    n_chars = 0
    for i, p in enumerate(files):
        text = p.read_text(encoding="utf-8", errors="replace")
        if i % int(d["holdout_every"]) == 0:
            held.append(text)
        elif n_chars < int(d["max_train_chars"]):
            train.append(text)
            n_chars += len(text)
    prose = "\n\n".join(topics[k] for k in sorted(topics))[: int(d["max_prose_chars"])]
    return "\n\n".join(train) + "\n\n" + prose, held


def train_tokenizer(text: str, vocab: int, out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab), initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator([text[i:i + 100_000] for i in range(0, len(text), 100_000)], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    fast.save_pretrained(str(out))
    return fast


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    d = cfg["data"]
    P = int(cfg["decode"]["prompt_len"])
    if d["source"] == "stdlib":
        text, held = _corpus(d)
        tok = train_tokenizer(text, int(d["vocab_size"]), out_dir / "tokenizer")
        ids = np.asarray(tok(text)["input_ids"], dtype=np.int32)
        np.save(out_dir / "train_tokens.npy", ids)
        docs = held
    else:
        import pandas as pd
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(cfg["model"]["pretrained"])
        tok.save_pretrained(str(out_dir / "tokenizer"))
        docs = pd.read_parquet(raw_dir / d["file"])[d.get("text_column", "text")].tolist()
    prompts = []
    for doc in docs:
        ids = tok(doc)["input_ids"]
        if len(ids) >= P:
            prompts.append(ids[:P])
        if len(prompts) >= int(d["n_prompts"]):
            break
    if not prompts:
        raise UserError(f"tokenswift: no held-out document has {P} tokens; lower decode.prompt_len")
    np.save(out_dir / "prompts.npy", np.asarray(prompts, dtype=np.int64))
    (out_dir / "data.json").write_text(json.dumps({"n_prompts": len(prompts), "prompt_len": P,
                                                   "vocab": len(tok)}))


def prompt_for(data_dir: Path, seed: int) -> list[int]:
    p = np.load(Path(data_dir) / "prompts.npy")
    return p[int(seed) % len(p)].tolist()
