"""WildChat-1M (allenai/WildChat-1M; Zhao et al. 2024) for the Section 5 analysis, full scale only.

download: the dataset's parquet shards through the shared `fetch` (no published checksums: the data
manifest records their sha256 on first download). preprocess: keep the conversations of the GPT
versions the analysis compares, one row per conversation with its user turns, then extract concepts
(data_concepts.extract_concepts: an instruct LLM at full scale, as the authors' Llama-3.1-8B-Instruct) and
build the concept hierarchy once, so every bootstrap replicate (seed) reuses them.
"""
from __future__ import annotations

import json
from pathlib import Path

from icml25.core.errors import UserError

# the versions of the authors' analysis code (Prevail-Safe-AI/Modeling-Value-Lockin, data-analysis/)
FAMILIES = {
    "gpt-3.5-turbo": ["gpt-3.5-turbo-0301", "gpt-3.5-turbo-0613", "gpt-3.5-turbo-0125"],
    "gpt-4": ["gpt-4-0314", "gpt-4-1106-preview", "gpt-4-0125-preview"],
}
COLUMNS = ["conversation_hash", "model", "timestamp", "conversation", "hashed_ip", "language"]


def download(wc: dict, raw_dir: Path) -> None:
    from icml25.core.download import fetch

    raw_dir.mkdir(parents=True, exist_ok=True)
    n = int(wc["n_shards"])
    sums = wc.get("sha256") or {}
    for i in range(n):
        name = wc["shard"].format(i=i, n=n)
        fetch(wc["base_url"].rstrip("/") + "/" + name, raw_dir / Path(name).name, sums.get(Path(name).name))


def family_of(model: str) -> str | None:
    for fam, versions in FAMILIES.items():
        if model in versions:
            return fam
    return None


def _user_text(conversation) -> str:
    turns = [t.get("content") or "" for t in conversation if (t.get("role") == "user")]
    return "\n".join(turns)


def load(raw_dir: Path, wc: dict):
    """One row per conversation of a compared GPT version: id, user (hashed IP), family, model, time, text."""
    import pandas as pd
    import pyarrow.parquet as pq

    shards = sorted(Path(raw_dir).glob("*.parquet"))
    if not shards:
        raise UserError(f"no WildChat parquet shards in {raw_dir}: run the download stage")
    parts = []
    for path in shards:
        have = set(pq.read_schema(path).names)
        missing = [c for c in COLUMNS if c not in have and c != "language"]
        if missing:
            raise UserError(f"{path.name}: missing column(s) {missing}; expected WildChat-1M parquet shards")
        parts.append(pq.read_table(path, columns=[c for c in COLUMNS if c in have]).to_pandas())
    df = pd.concat(parts, ignore_index=True)
    df["family"] = df["model"].map(family_of)
    df = df[df["family"].notna() & df["hashed_ip"].notna()]
    langs = wc.get("languages")
    if langs and "language" in df:
        df = df[df["language"].isin(langs)]
    out = pd.DataFrame({
        "conv": df["conversation_hash"].astype(str).values,
        "user": df["hashed_ip"].astype(str).values,
        "family": df["family"].values,
        "model": df["model"].values,
        "time": pd.to_datetime(df["timestamp"], utc=True).dt.tz_convert(None).to_numpy(),  # naive UTC
        "text": [_user_text(c) for c in df["conversation"]],
    })
    limit = wc.get("max_conversations")
    if limit and len(out) > int(limit):  # a uniform subsample, seeded: the extraction LLM is the cost
        out = out.sample(n=int(limit), random_state=int(wc.get("subsample_seed", 0)))
    return out.sort_values("time").reset_index(drop=True)


def preprocess(wc: dict, raw_dir: Path, out_dir: Path) -> None:
    import numpy as np

    from . import data_concepts as W

    out_dir.mkdir(parents=True, exist_ok=True)
    conv = load(raw_dir, wc)
    concepts = W.extract_concepts(list(conv["text"]), wc["extractor"])
    vocab = sorted({c for cs in concepts for c in cs})
    if len(vocab) < 2:
        raise UserError("WildChat: fewer than 2 distinct concepts were extracted; check the extractor config")
    index = {c: i for i, c in enumerate(vocab)}
    emb = W.embed_concepts(vocab, wc["embedder"])
    paths, sizes = W.build_tree(emb, int(wc["tree"]["branching"]), int(wc["tree"]["depth"]),
                                seed=int(wc["tree"].get("seed", 0)))
    conv["concepts"] = [json.dumps([index[c] for c in cs]) for cs in concepts]
    conv.drop(columns=["text"]).to_parquet(out_dir / "conversations.parquet", index=False)
    np.savez(out_dir / "tree.npz", paths=paths, sizes=sizes)
    (out_dir / "concepts.json").write_text(json.dumps(vocab))
