"""gradmm at smoke scale through the real `snakemake` CLI (table, claims, figures, the privacy check), and
the full-scale loaders (HF parquet splits, a Hub-style model id) on tiny local stand-ins."""
from __future__ import annotations

import json

import pytest


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["real", "gradmm"]


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke("gradmm")  # the session's one snakemake run, with SMOKE_METHODS for this study
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "gradmm.md").read_text()
    assert "up to +32.4" in md and "## Claims" in md
    claims = {c["id"]: c for c in json.loads((tables / "gradmm.claims.json").read_text())["claims"]}
    assert claims["beats_prompted"]["verdict"] == "n.a."  # prompted not run: n.a., not a crash
    assert claims["transfer"]["verdict"] == "n.a."
    assert claims["on_par_real"]["verdict"] in ("holds", "fails")
    figs = json.loads((root / "results" / "smoke" / "figures" / "gradmm" / "figures.json").read_text())
    names = {f["name"] for f in figs["figures"]}
    assert {"test_accuracy", "grad_cos_vs_iteration"} <= names
    run = root / "results" / "smoke" / "gradmm" / "gradmm" / "seed0"
    rec = {r["metric"]: r["value"] for r in json.loads((run / "metrics.json").read_text())["metrics"]}
    assert rec["max_ngram"] < 8  # no synthetic text shares 8 consecutive tokens with a real example
    kept = [json.loads(line) for line in (run / "train_set.jsonl").read_text().splitlines()]
    matched = [json.loads(line)["text"] for line in
               (root / "data" / "processed" / "smoke" / "gradmm" / "matched.jsonl").read_text().splitlines()]
    assert kept and not {k["text"] for k in kept} & set(matched)  # no real example copied
    test = [json.loads(line)["text"] for line in
            (root / "data" / "processed" / "smoke" / "gradmm" / "test.jsonl").read_text().splitlines()]
    assert not set(test) & set(matched)  # never evaluated on the matched examples


def test_full_scale_parquet_and_hub_loaders_on_local_stand_ins(tmp_path, file_server):
    import pandas as pd

    from icml25.studies.gradmm import data as D
    from icml25.studies.gradmm import lm
    from icml25.studies.gradmm.study import _load, fit_base

    site = tmp_path / "site"
    site.mkdir()
    words = ["good", "bad", "fine", "dull", "great", "weak"]
    for split, n in (("train", 40), ("validation", 10), ("test", 30)):
        pd.DataFrame({"text": [f"a {words[i % 6]} {split} film number {i} here" for i in range(n)],
                      "label": [i % 2 for i in range(n)]}).to_parquet(site / f"{split}.parquet")
    pd.DataFrame({"text": ["some general english text for pretraining " * 5] * 3}).to_parquet(site / "wiki.parquet")
    url = file_server(site)
    cfg = {"data": {"source": "parquet", "seed": 0, "min_words": 2, "max_words": 50, "n_matched_per_class": 5,
                    "n_test": 20, "wiki_chars": 10000,
                    "parquet": {"splits": {s: f"{url}/{s}.parquet" for s in ("train", "validation", "test")},
                                "text_column": "text", "label_map": {0: 0, 1: 1}, "test_split": "test"},
                    "pretrain_parquet": {"wiki": f"{url}/wiki.parquet"}}}
    raw = tmp_path / "raw"
    raw.mkdir()
    D.download(cfg, raw)
    splits = D.make_splits(cfg, raw)
    assert len(splits["matched"]) == 10 and len(splits["test"]) == 20
    test_texts = set(pd.read_parquet(site / "test.parquet")["text"])
    assert {r["text"] for r in splits["test"]} <= test_texts           # test from the test split
    assert not {r["text"] for r in splits["matched"]} & test_texts     # matched from train / validation
    docs = D.pretrain_texts(cfg, raw, splits)
    assert any("pretraining" in d for d in docs) and not {r["text"] for r in splits["test"]} & set(docs)
    # a Hub id at full scale: the same from_pretrained call as the local directory of a saved tiny model
    tok = lm.train_tokenizer(docs * 3, 280, tmp_path / "tok", [" It was", " great", " bad"])
    model = lm.build_model({"d_model": 8, "n_layer": 1, "n_head": 2, "ctx": 32}, len(tok), 0)
    lm.save(model, tok, tmp_path / "hub_model")
    base = tmp_path / "base"
    base.mkdir()
    fit_base({"base": {"source": "hub", "model_id": str(tmp_path / "hub_model")}}, tmp_path, base)
    m2, tok2, task = _load({"task": {"prompt": " It was", "labels": {0: " bad", 1: " great"}}}, base)
    assert type(m2).__name__ == "GPT2LMHeadModel" and task.label_ids[0] != task.label_ids[1]
    with pytest.raises(Exception, match="run the download stage"):
        (raw / "test.parquet").unlink()
        D.labelled_frame(cfg, raw)
