"""Concepts of user messages and their hierarchy (Section 5's pipeline, run once in the data stage).

* extract_concepts: an instruct LLM lists the concepts of each message (the authors' prompt asks for
  short phrases naming ideas, topics, events, names or terms, in English); `keywords` is a cheap
  stand-in used only on the tiny local test data.
* embed_concepts: a sentence encoder loaded with from_pretrained, mean-pooled (the authors use
  voyage-3-large, a paid API); `hashing` (character n-grams) is the test stand-in.
* build_tree: the authors cluster 5.4M concept embeddings with EVoC into a hierarchy; ours is a
  hierarchical k-means tree (branching b, depth L; every concept is a leaf), which scales the same way.
  The tree is stored as each concept's root-to-leaf path of node ids plus the size (number of concept
  leaves) of every node, which is all lineage diversity needs.
"""
from __future__ import annotations

import re

import numpy as np

PROMPT = ("Read the user's message and list every concept in it: short phrases of one to a few words that "
          "name an idea, topic, event, name or domain-specific term. Always give concepts in English, "
          "comma-separated, nothing else.\n\nMessage: {text}\n\nConcepts:")
STOP = set("""a about above after again all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having he
her here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only
or other our out over own please same she should so some such than that the their them then there these they
this those through to too under until up very was we were what when where which while who whom why will with
would you your write make give tell want need like know think help""".split())


def normalise(concept: str) -> str:
    c = re.sub(r"[^\w\s'-]", " ", concept.lower())
    return re.sub(r"\s+", " ", c).strip(" -'")


def _keywords(text: str, k: int) -> list[str]:
    words = [w for w in re.findall(r"[a-z][a-z'-]{3,}", text.lower()) if w not in STOP]
    seen, out = set(), []
    for w in words:
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out[:k]


def parse_concepts(generated: str, k: int) -> list[str]:
    first = generated.strip().split("\n\n")[0]
    items = [normalise(x) for x in re.split(r"[,;\n]|\s-\s", first)]
    seen, out = set(), []
    for x in items:
        if x and len(x) <= 60 and x not in seen:
            seen.add(x)
            out.append(x)
    return out[:k]


def extract_concepts(texts: list[str], ext: dict) -> list[list[str]]:
    k = int(ext.get("max_concepts", 12))
    kind = ext["kind"]
    if kind == "keywords":
        return [_keywords(t, k) for t in texts]
    if kind != "llm":
        raise ValueError(f"unknown concept extractor {kind!r} (llm | keywords)")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ext["model"])
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = getattr(torch, ext["dtype"]) if ext.get("dtype") else None
    model = AutoModelForCausalLM.from_pretrained(ext["model"], **({"dtype": dtype} if dtype else {}))
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(dev).eval()
    chars, bs, out = int(ext.get("max_chars", 2000)), int(ext.get("batch_size", 16)), []
    for i in range(0, len(texts), bs):
        prompts = []
        for t in texts[i:i + bs]:
            msg = PROMPT.format(text=t[:chars])
            if getattr(tok, "chat_template", None):
                msg = tok.apply_chat_template([{"role": "user", "content": msg}], tokenize=False, add_generation_prompt=True)
            prompts.append(msg)
        enc = tok(prompts, return_tensors="pt", padding=True, truncation=True,
                  max_length=int(ext.get("max_prompt_tokens", 1024))).to(dev)
        with torch.no_grad():  # greedy: the extraction is deterministic
            gen = model.generate(**enc, do_sample=False, max_new_tokens=int(ext.get("max_new_tokens", 64)),
                                 pad_token_id=tok.pad_token_id)
        for g in tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True):
            out.append(parse_concepts(g, k))
    return out


def embed_concepts(concepts: list[str], emb: dict) -> np.ndarray:
    kind = emb["kind"]
    if kind == "hashing":
        from sklearn.feature_extraction.text import HashingVectorizer

        vec = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 4), n_features=int(emb.get("n_features", 1024)),
                                alternate_sign=False, norm="l2")
        return vec.transform(concepts).toarray()
    if kind != "encoder":
        raise ValueError(f"unknown concept embedder {kind!r} (encoder | hashing)")
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(emb["model"])
    model = AutoModel.from_pretrained(emb["model"]).eval()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(dev)
    bs, rows = int(emb.get("batch_size", 256)), []
    for i in range(0, len(concepts), bs):
        enc = tok(concepts[i:i + bs], return_tensors="pt", padding=True, truncation=True, max_length=32).to(dev)
        with torch.no_grad():
            h = model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        v = (h * m).sum(1) / m.sum(1)
        rows.append(torch.nn.functional.normalize(v, dim=1).float().cpu().numpy())
    return np.concatenate(rows)


def build_tree(emb: np.ndarray, branching: int, depth: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Hierarchical k-means: `paths[c]` are the node ids from level 1 to the concept's own leaf (node 0
    is the root), `sizes[node]` the number of concepts under it."""
    from sklearn.cluster import KMeans

    n = emb.shape[0]
    paths = np.zeros((n, depth + 1), dtype=np.int64)
    sizes = [n]
    groups = [np.arange(n)]
    for level in range(depth):
        nxt = []
        for idx in groups:
            if len(idx) <= branching:
                labels = np.arange(len(idx))  # too few to cluster: each concept its own child
            else:
                labels = KMeans(branching, n_init=3, random_state=seed).fit_predict(emb[idx])
            for lab in np.unique(labels):
                members = idx[labels == lab]
                paths[members, level] = len(sizes)
                sizes.append(len(members))
                nxt.append(members)
        groups = nxt
    paths[:, depth] = len(sizes) + np.arange(n)  # the concepts themselves: leaves of size 1
    sizes.extend([1] * n)
    return paths, np.asarray(sizes, dtype=np.int64)
