"""Data stages: the simulated ECG-report corpus (mini, smoke), the full scale's PhysioNet records (wfdb),
the text tokenizer / encoder directory and the N3S negative candidates.

Layout of the preprocessed directory:
  pretrain.npz   x (N, 12, T) float32, ids          pretrain_reports.json  one report per record
  down_train.npz / down_test.npz / shift_test.npz   x, y (n, n_labels), ids   (downstream: other seeds)
  labels.json    label names and zero-shot prompts
  text/          a tokenizer + T5EncoderModel saved with save_pretrained (mini) or a Hub id (full)
  n3s.npz        per distinct report: the indices of its k most dissimilar reports (N3S candidates); report_index
                 maps each pretraining record to its distinct report
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from icml25.core.io import write_json

from . import data_ecgsyn as G
from . import data_reports as R


def download(cfg: dict, raw_dir: Path) -> None:
    raw_dir.mkdir(parents=True, exist_ok=True)
    d = cfg["data"]
    if d["source"] == "synthetic":
        write_json(raw_dir / "sources.json", {"source": "synthetic ECGSYN corpus, generated in preprocess"})
        return
    from icml25.core.download import fetch

    from . import data_downstream as DS

    used = {d["pretrain"]} | {v for t in d["downstream"] for k, v in d["tasks"][t].items() if k in ("dataset", "test_dataset")}
    for name in sorted(used):
        spec = d["datasets"][name]
        out = raw_dir / name
        kind = spec.get("kind", "index")
        if kind == "wfdb_dx":
            DS.download_dx(spec, out)
            continue
        if kind == "hdf5":
            DS.download_hdf5(spec, out)
            continue
        base = spec["base"].rstrip("/")
        # PhysioNet's published SHA256SUMS.txt, where named, gives every file's checksum
        sums = DS.read_sums(fetch(f"{base}/{spec['manifest']}", out / spec["manifest"], None)) if spec.get("manifest") else {}
        for f, sha in (spec.get("index_files") or {}).items():
            fetch(f"{base}/{f}", out / f, sha or sums.get(f))
        for rec in _wfdb_records(spec, out):
            for ext in (".hea", ".dat"):
                fetch(f"{base}/{rec}{ext}", out / f"{rec}{ext}", sums.get(rec + ext))
    write_json(raw_dir / "sources.json", {k: d["datasets"][k]["base"] for k in sorted(used)})


def preprocess(cfg: dict, raw_dir: Path, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    d = cfg["data"]
    if d["source"] == "synthetic":
        _synthetic(cfg, out_dir)
    else:
        _physionet(cfg, raw_dir, out_dir)
    _text_dir(cfg, out_dir)
    _n3s(cfg, out_dir)


# ---- the synthetic corpus ------------------------------------------------------------------------------

def _split(gen: dict, n: int, rng, prefix: str):
    y = G.sample_conditions(n, rng, gen["prevalence"])
    x = G.add_gains(G.generate(y, rng, gen), rng, float(gen["noise"]["lead_gain_sd"]))
    return x, y, np.array([f"{prefix}-{i:06d}" for i in range(n)])


def _synthetic(cfg: dict, out: Path) -> None:
    d = cfg["data"]
    gen = d["generator"]
    seed = int(d["seed"])
    x, y, ids = _split(gen, int(d["n_pretrain"]), np.random.default_rng([seed, 0]), "pre")
    texts = R.reports(y, np.random.default_rng([seed, 1]), d["report_drop"])
    np.savez(out / "pretrain.npz", x=x, y=y, ids=ids)  # y: the generator's truth, never used by pretraining
    (out / "pretrain_reports.json").write_text(json.dumps(texts))
    # downstream records come from other generator seeds: no pretraining record is ever probed
    n_tr, n_te = int(d["n_down_train"]), int(d["n_down_test"])
    x, y, ids = _split(gen, n_tr + n_te, np.random.default_rng([seed, 2]), "down")
    np.savez(out / "down_train.npz", x=x[:n_tr], y=y[:n_tr], ids=ids[:n_tr])
    np.savez(out / "down_test.npz", x=x[n_tr:], y=y[n_tr:], ids=ids[n_tr:])
    shifted = _deep_merge(gen, d["shift"])
    x, y, ids = _split(shifted, int(d["n_shift_test"]), np.random.default_rng([seed, 3]), "shift")
    np.savez(out / "shift_test.npz", x=x, y=y, ids=ids)
    write_json(out / "labels.json", {"labels": list(G.LABELS), "prompts": [R.PROMPTS[k] for k in G.LABELS]})


def _deep_merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in (b or {}).items():
        out[k] = _deep_merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
    return out


# ---- full scale: PhysioNet wfdb records ------------------------------------------------------------------

def _wfdb_records(spec: dict, root: Path) -> list[str]:
    """Record paths (without extension) listed by the dataset's index csv, capped at max_records."""
    import pandas as pd

    idx = pd.read_csv(root / spec["index"])
    recs = [str(r) for r in idx[spec["path_col"]]]
    cap = spec.get("max_records")
    return recs[: int(cap)] if cap else recs


def _physionet(cfg: dict, raw_dir: Path, out: Path) -> None:
    import pandas as pd

    from . import data_downstream as DS

    d = cfg["data"]
    fs, sec = int(d["fs"]), float(d["seconds"])
    pre = d["datasets"][d["pretrain"]]
    root = raw_dir / d["pretrain"]
    recs = _wfdb_records(pre, root)
    x = DS.read_wfdb(root, recs, fs, sec)
    idx = pd.read_csv(root / pre["index"]).set_index(pre["path_col"])
    rep = pd.read_csv(root / pre["reports"]).set_index(pre["reports_key"])
    cols = [c for c in rep.columns if c.startswith(pre["report_prefix"])]
    keys = [idx.loc[r, pre["reports_key"]] for r in recs]
    texts = [". ".join(v.strip() for v in rep.loc[k, cols] if isinstance(v, str)).lower() for k in keys]
    np.savez(out / "pretrain.npz", x=x, y=np.zeros((len(recs), 0), np.int8), ids=np.array(recs))
    (out / "pretrain_reports.json").write_text(json.dumps(texts))
    # downstream: one directory per task (PTB-XL groupings, CPSC2018, CSN, CODE), listed in tasks.json
    tasks = DS.build_tasks(cfg, raw_dir, out)
    write_json(out / "tasks.json", [{"name": t, "in_mean": bool(d["tasks"][t].get("in_mean", True))} for t in tasks])
    write_json(out / "labels.json", {"tasks": tasks})   # each task's labels and prompts: tasks/<task>/labels.json


# ---- text encoder directory and N3S ----------------------------------------------------------------------

def _text_dir(cfg: dict, out: Path) -> None:
    """Mini / smoke: a word-level tokenizer on the pretraining reports and a randomly initialised small
    T5EncoderModel, saved with save_pretrained so training loads it with from_pretrained(dir), the call
    that loads google/flan-t5-base at full scale."""
    t = cfg["data"]["text"]
    if not t.get("build_local", False):
        return
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5EncoderModel

    texts = json.loads((out / "pretrain_reports.json").read_text())
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    words = sorted({w for s in texts for w, _ in tok.pre_tokenizer.pre_tokenize_str(s.lower())})
    tok.model = models.WordLevel({w: i for i, w in enumerate(special + words)}, unk_token="[UNK]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=int(t["max_len"]))
    d = out / "text"
    fast.save_pretrained(d)
    torch.manual_seed(int(t["init_seed"]))
    conf = T5Config(vocab_size=len(special) + len(words), d_model=int(t["d_model"]), d_kv=int(t["d_model"]) // int(t["heads"]),
                    d_ff=int(t["d_ff"]), num_layers=int(t["layers"]), num_heads=int(t["heads"]), dropout_rate=0.1,
                    pad_token_id=0, eos_token_id=3, decoder_start_token_id=0)
    T5EncoderModel(conf).save_pretrained(d)


def text_source(cfg: dict, data_dir: Path, key: str = "model") -> str:
    t = cfg["data"]["text"]
    return str(data_dir / "text") if t.get("build_local", False) else str(t[key])


def embed_reports(cfg: dict, data_dir: Path, texts: list[str]) -> np.ndarray:
    """Mean-pooled, L2-normalised embeddings from the frozen N3S text encoder (google/flan-t5-small in the
    paper; at mini the frozen random-init T5 of text/, see README)."""
    import torch
    from transformers import AutoTokenizer, T5EncoderModel

    src = text_source(cfg, data_dir, "n3s_model")
    tok = AutoTokenizer.from_pretrained(src)
    model = T5EncoderModel.from_pretrained(src).eval()
    embs = []
    with torch.no_grad():
        for i in range(0, len(texts), 256):
            enc = tok(texts[i:i + 256], padding=True, truncation=True, max_length=int(cfg["data"]["text"]["max_len"]), return_tensors="pt")
            h = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
            # the official n3s.py averages over every position (padding included); we average over real tokens
            m = enc["attention_mask"].unsqueeze(-1).float()
            embs.append(((h * m).sum(1) / m.sum(1)).numpy())
    e = np.concatenate(embs)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-10)


def n3s_candidates(emb: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """The official N3S search: an exact L2 index over unit embeddings queried with -q, so the k returned
    reports are the k with the smallest cosine to q (||e + q||^2 = 2 + 2 cos(e, q))."""
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=min(k, len(emb)), algorithm="brute", metric="euclidean").fit(emb)
    return nn.kneighbors(-query, return_distance=False)


def _n3s(cfg: dict, out: Path) -> None:
    texts = json.loads((out / "pretrain_reports.json").read_text())
    uniq = sorted(set(texts))  # the official index holds the deduplicated training reports
    pos = {t: i for i, t in enumerate(uniq)}
    emb = embed_reports(cfg, out, uniq)
    cand = n3s_candidates(emb, emb, int(cfg["data"]["n3s"]["k"]))
    np.savez(out / "n3s.npz", candidates=cand.astype(np.int32), report_index=np.array([pos[t] for t in texts], np.int32),
             embeddings=emb.astype(np.float32))
    (out / "n3s_reports.json").write_text(json.dumps(uniq))
