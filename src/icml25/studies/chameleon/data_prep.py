"""Preprocess: per domain, cut the text into fixed-size blocks, keep an evenly spaced subset up to a cap,
hold out every `test_every`-th block as test text (never trained on), train a byte-level BPE tokenizer on
the training blocks and write the token ids.

Outputs (data/processed/<scale>/chameleon/): tokenizer.json, tokens.npz (`<domain>.train`, `<domain>.test`,
uint16) and domains.json (natural size in characters, used characters and tokens per split).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import data_sources as S

EOS = "<|endoftext|>"


def blocks(text: str, block_chars: int, max_chars: int) -> list[str]:
    """Fixed-size character blocks, evenly subsampled (deterministically) down to max_chars."""
    bl = [text[i:i + block_chars] for i in range(0, len(text), block_chars)]
    keep = max(1, max_chars // block_chars)
    if len(bl) > keep:
        idx = np.unique(np.linspace(0, len(bl) - 1, keep).round().astype(int))
        bl = [bl[i] for i in idx]
    return bl


def split_blocks(bl: list[str], test_every: int) -> tuple[list[str], list[str]]:
    """Every `test_every`-th block (offset test_every // 2) is test; the rest is train. Disjoint by construction."""
    off = test_every // 2
    test = [b for i, b in enumerate(bl) if i % test_every == off]
    train = [b for i, b in enumerate(bl) if i % test_every != off]
    return train, test


def train_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def encode(tok, bl: list[str]) -> np.ndarray:
    eos = tok.token_to_id(EOS)
    ids = []
    for enc in tok.encode_batch(bl):
        ids += enc.ids
    ids.append(eos)
    return np.asarray(ids, dtype=np.uint16)


def preprocess(dcfg: dict, raw_dir: Path, out_dir: Path) -> dict:
    domains = list(dcfg["pretrain_domains"]) + list(dcfg["new_domains"])
    bc, cap, every = int(dcfg["block_chars"]), int(dcfg["max_chars"]), int(dcfg["test_every"])
    splits, info = {}, {}
    texts = {}
    if dcfg.get("pretrain_source") == "slimpajama":  # full scale: the paper's SlimPajama-6B domains
        texts = S.slimpajama_texts(raw_dir, list(dcfg["pretrain_domains"]), cap * 2)
    for d in domains:
        text = texts[d] if d in texts else S.extract(d, raw_dir)
        train, test = split_blocks(blocks(text, bc, cap), every)
        splits[d] = (train, test)
        info[d] = {"natural_chars": len(text), "train_chars": sum(map(len, train)), "test_chars": sum(map(len, test))}
    # tokenizer: the same character budget from every domain's training blocks
    per = int(dcfg["tokenizer_chars_per_domain"])
    corpus = []
    for d in domains:
        tr = splits[d][0]
        corpus += blocks("".join(tr), bc, per)
    tok = train_tokenizer(corpus, int(dcfg["vocab_size"]))
    tok.save(str(out_dir / "tokenizer.json"))
    arrays = {}
    for d in domains:
        for name, bl in zip(("train", "test"), splits[d]):
            arrays[f"{d}.{name}"] = encode(tok, bl)
            info[d][f"{name}_tokens"] = int(len(arrays[f"{d}.{name}"]))
    np.savez(out_dir / "tokens.npz", **arrays)
    meta = {"pretrain_domains": list(dcfg["pretrain_domains"]), "new_domains": list(dcfg["new_domains"]),
            "vocab_size": tok.get_vocab_size(), "domains": info}
    (out_dir / "domains.json").write_text(json.dumps(meta, indent=1))
    return meta


def load(data_dir: Path) -> tuple[dict, dict]:
    """(meta, {domain: {"train": ids, "test": ids}})."""
    meta = json.loads((data_dir / "domains.json").read_text())
    z = np.load(data_dir / "tokens.npz")
    toks = {}
    for key in z.files:
        d, split = key.rsplit(".", 1)
        toks.setdefault(d, {})[split] = z[key].astype(np.int64)
    return meta, toks
