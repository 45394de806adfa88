"""tokenswift end to end at smoke scale through the real `snakemake` CLI, and the full-scale loaders (PG-19
parquet over HTTP, a sharded safetensors checkpoint carrying the heads as `model.medusa_layers.*`, its own
tokenizer) on tiny local stand-ins through the same code path."""
from __future__ import annotations

import json

import yaml


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["ar", "tokenswift"]


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke("tokenswift")  # the session's one snakemake run, with SMOKE_METHODS for this study
    raw = yaml.safe_load((root / "config" / "studies" / "tokenswift.yaml").read_text())
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "tokenswift.md").read_text()
    assert "TokenSwift" in md and "0.84" in md and "## Claims" in md
    claims = {c["id"]: c for c in json.loads((tables / "tokenswift.claims.json").read_text())["claims"]}
    assert claims["lossless"]["verdict"] == "holds"  # smoke model, but exactness does not depend on quality
    assert claims["penalty_diversity"]["verdict"] == "n.a."  # no penalty ablation run: n.a., not a crash
    assert claims["ngram_reuse"]["verdict"] == "n.a."
    assert claims["speedup_3x"]["verdict"] == "n.a."
    figs = json.loads((root / "results" / "smoke" / "figures" / "tokenswift" / "figures.json").read_text())
    names = {f["name"] for f in figs["figures"]}
    assert {"alpha_vs_length", "tokens_per_step"} <= names
    rec = json.loads((root / "results" / "smoke" / "tokenswift" / "tokenswift" / "seed0" / "metrics.json").read_text())
    m = {(r["setting"], r["metric"]): r["value"] for r in rec["metrics"]}
    assert m[("greedy", "accounting_gap")] == 0 and m[("sampled", "gen_tokens")] == raw["scales"]["smoke"]["decode"]["gen_len"]["sampled"]
    assert m[("greedy", "kv_max_err")] < 1e-5


def test_full_scale_loaders_on_local_stand_ins(tmp_path, file_server):
    import pandas as pd
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    from icml25.studies.tokenswift import base, data, runner

    # PG-19-format parquet served over HTTP (the full config's url/file/text_column)
    site = tmp_path / "site"
    site.mkdir()
    books = ["the quick brown fox jumps over the lazy dog. " * 40, "short", "a b c d e f g h " * 50]
    pd.DataFrame({"short_book_title": ["a", "b", "c"], "text": books}).to_parquet(site / "test.parquet")
    url = file_server(site)
    # a tiny "released checkpoint": sharded safetensors + index, heads inside, its own tokenizer
    ckpt = tmp_path / "ckpt"
    tok = data.train_tokenizer("".join(books), 300, ckpt)
    conf = LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=64, max_position_embeddings=4096, vocab_size=len(tok))
    LlamaForCausalLM(conf).save_pretrained(str(ckpt), max_shard_size="40KB")
    index = json.loads((ckpt / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    heads = {f"model.medusa_layers.{k}.{n}.weight": (torch.randn(32, 32) * 0.1 if n == "linear" else torch.ones(32))
             for k in range(3) for n in ("linear", "input_layernorm", "post_layernorm")}
    save_file(heads, str(ckpt / "heads-00001.safetensors"))
    index["weight_map"].update({k: "heads-00001.safetensors" for k in heads})
    (ckpt / "model.safetensors.index.json").write_text(json.dumps(index))

    cfg = {"data": {"source": "pg19", "url": f"{url}/test.parquet", "file": "pg19_test.parquet", "sha256": None,
                    "text_column": "text", "n_prompts": 2},
           "model": {"pretrained": str(ckpt), "heads": None, "dtype": "float32"},
           "heads": {"n_heads": 3},
           "decode": {"modes": ["greedy", "sampled"], "prompt_len": 64, "gen_len": {"greedy": 30, "sampled": 30},
                      "temperature": 1.0, "penalty": 1.2, "window": 16, "min_p": 0.1, "budget": 32, "sink": 4,
                      "topk": 10, "ngram_k": 20, "ngram_n": 4, "record_every": 10},
           "roofline": {"weight_bytes": 1e9, "kv_bytes_per_token": 1e5, "flat_tokens": 64}}
    raw, dd, bd = tmp_path / "raw", tmp_path / "data", tmp_path / "base"
    for d in (raw, dd, bd):
        d.mkdir()
    data.download(cfg, raw)
    data.preprocess(cfg, raw, dd)
    prompts = __import__("numpy").load(dd / "prompts.npy")
    assert prompts.shape == (2, 64)  # the 'short' book is skipped
    assert prompts[0].tolist() == tok(books[0])["input_ids"][:64]
    base.fit_base(cfg, dd, bd)
    engine, h = base.load(cfg, bd)
    sd = h.state_dict()
    assert torch.equal(sd["heads.1.linear.weight"], heads["model.medusa_layers.1.linear.weight"])
    assert len(load_file(str(ckpt / "heads-00001.safetensors"))) == 9
    run = tmp_path / "run"
    run.mkdir()
    res = {}
    for m in ("ar", "tokenswift"):
        out = runner.run(cfg, m, 0, dd, bd, run)
        res[m] = {(r["setting"], r["metric"]): r["value"] for r in out["metrics"]}
    for s in ("greedy", "sampled"):
        assert res["ar"][(s, "fingerprint")] == res["tokenswift"][(s, "fingerprint")]
