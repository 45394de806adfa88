"""The `device` setting (cpu at smoke / mini, auto at full) reaches every model the stages load, models are
saved from the host; and the transfer path: a second, differently built tiny LM (Llama architecture, its own
tokenizer, a local directory standing in for a Hub id) is fine-tuned on a method's training set by evaluate,
its accuracy read by the `transfer` claim and shown in the table."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from icml25.core import config  # noqa: E402
from icml25.core.errors import UserError  # noqa: E402
from icml25.studies.gradmm import lm, transfer as T  # noqa: E402
from icml25.studies.gradmm import study as ST  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
TEXTS = ["the film is a great story of love and loss", "a bad movie with a dull plot and weak acting",
         "an honest and moving drama", "the jokes fall flat and the pace is slow", "it was great fun to watch",
         "the cast is good but the script is bad", "a warm and funny film about a family",
         "boring and far too long for its own good"] * 4
MUST = [" It was", " great", " bad", " It", " was"]


def _cfg(scale="smoke"):
    return config.effective(config.load_study(ROOT, "gradmm"), scale)


def test_device_setting_per_scale_and_resolution():
    assert _cfg("smoke")["device"] == "cpu" and _cfg("mini")["device"] == "cpu"
    assert _cfg("full")["device"] == "auto"
    assert lm.device_of({"device": "cpu"}) == torch.device("cpu")
    assert lm.device_of({}) == torch.device("cpu")
    want = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    assert lm.device_of({"device": "auto"}) == want


def _gpt2_dir(tmp_path):
    tok = lm.train_tokenizer(TEXTS, 300, tmp_path / "gtok", MUST)
    model = lm.build_model({"d_model": 16, "n_layer": 1, "n_head": 2, "ctx": 64}, len(tok), 0)
    lm.save(model, tok, tmp_path / "gpt2")
    return tmp_path / "gpt2"


def _llama_dir(tmp_path):
    """A second LM family: Llama blocks (RMSNorm, rotary, SwiGLU) and a tokenizer of another size."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = lm.train_tokenizer(TEXTS, 280, tmp_path / "ltok", MUST)
    torch.manual_seed(1)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                         max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
                                         pad_token_id=0))
    lm.save(model, tok, tmp_path / "llama")
    return tmp_path / "llama"


def test_models_load_on_the_configured_device_and_save_from_the_host(tmp_path):
    path = _gpt2_dir(tmp_path)
    base = tmp_path / "base"
    base.mkdir()
    ST.fit_base({"base": {"source": "hub", "model_id": str(path)}}, tmp_path, base)
    cfg = {"device": "cpu", "task": {"prompt": " It was", "labels": {0: " bad", 1: " great"}}}
    model, tok, task = ST._load(cfg, base)
    assert lm.model_device(model) == lm.device_of(cfg)
    # every tensor the helpers build follows the model's device
    ids, mask = lm.pad_left([[1, 2], [3]], 0, lm.model_device(model))
    assert ids.device == mask.device == lm.model_device(model)
    lm.save(model, tok, tmp_path / "again")
    assert lm.model_device(model) == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no CUDA device"):  # the configured device is used, not ignored
            ST._load(dict(cfg, device="cuda"), base)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_admm_on_cuda_matches_the_host_shapes(tmp_path):
    from icml25.studies.gradmm import admm as A
    from icml25.studies.gradmm import matching as M

    model, tok = lm.load(_gpt2_dir(tmp_path), "cuda")
    task = lm.Task(tok, " It was", {0: " bad", 1: " great"})
    M.freeze_all_but_lm_head(model)
    banned = M.banned_tokens(tok, model.get_input_embeddings().weight.shape[0])
    g, _, _ = M.target_gradient(model, [task.encode(t, 8) for t in TEXTS[:4]], task.label_ids[1], dp=dict(
        c=1.0, epsilon=1.0, delta=1e-4), generator=torch.Generator().manual_seed(0))
    m = A.Matcher(model, task, g, task.label_ids[1], banned, prefix=[task.eos])
    cfg = {"outer": 1, "inner": 1, "rho": 0.1, "lr": 0.008, "lr_decay": 0.9, "topk": 5, "grad_clip": 1.0,
           "init_candidates": 2, "init_size": 1.0}
    res = A.run_admm(m, 1, 2, 6, cfg, torch.Generator().manual_seed(0))
    assert res["ids"].device.type == "cuda" and res["ids"].shape == (1, 2, 6)


def _stage_dirs(tmp_path, cfg):
    data, base, run = tmp_path / "data", tmp_path / "base", tmp_path / "run"
    for d in (data, base, run):
        d.mkdir()
    rows = [{"text": t, "label": int("great" in t or "good" in t or "warm" in t)} for t in TEXTS[:8]]
    for name, r in (("matched", rows), ("test", rows[::-1])):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in r))
    train_set = [{"text": t + " indeed", "label": r["label"]} for t, r in zip(TEXTS[:8], rows)]
    (run / "train_set.jsonl").write_text("".join(json.dumps(x) + "\n" for x in train_set))
    ST.fit_base({"base": {"source": "hub", "model_id": str(_gpt2_dir(tmp_path))}}, data, base)
    return data, base, run, train_set


def test_evaluate_fine_tunes_the_second_lm_family_on_the_set(tmp_path, monkeypatch):
    cfg = _cfg("smoke")
    cfg["transfer"]["models"] = {"tinyllama": str(_llama_dir(tmp_path))}
    data, base, run, train_set = _stage_dirs(tmp_path, cfg)
    seen = []
    real_ft = lm.finetune_classifier

    def spy(model, task, examples, *a, **k):
        seen.append((type(model).__name__, len(task.tok), [e["text"] for e in examples]))
        return real_ft(model, task, examples, *a, **k)

    monkeypatch.setattr(lm, "finetune_classifier", spy)
    rows = ST.evaluate(cfg, "gradmm", 0, data, base, run)
    acc = [r for r in rows if r["setting"] == "transfer_tinyllama"]
    assert len(acc) == 1 and acc[0]["metric"] == "test_acc" and 0 <= acc[0]["value"] <= 100
    # first the base LM (GPT-2), then the transfer LM (Llama, its own tokenizer), both on the same texts
    assert [s[0] for s in seen] == ["GPT2LMHeadModel", "LlamaForCausalLM"]
    assert seen[0][1] != seen[1][1] and seen[0][2] == seen[1][2] == [e["text"] for e in train_set]
    # a method outside transfer.methods gets no transfer row; without transfer models nothing changes
    assert not [r for r in ST.evaluate(cfg, "embed_match", 0, data, base, run) if r["setting"].startswith("transfer")]
    assert not T.applies(_cfg("smoke"), "gradmm") and not T.applies(_cfg("mini"), "gradmm")


def _agg(values):
    import pandas as pd

    from icml25.tables import aggregate

    long = pd.DataFrame([{"method": m, "setting": s, "metric": "test_acc", "seed": seed, "value": v}
                         for (m, s), vs in values.items() for seed, v in enumerate(vs)])
    return aggregate(long)


def test_transfer_claim_reads_the_worst_transfer_lm_and_is_na_without_one():
    cfg = _cfg("full")
    agg = _agg({("gradmm", "transfer_llama"): [60, 62, 61], ("real", "transfer_llama"): [55, 56, 57],
                ("gradmm", "transfer_opt"): [58, 58, 58], ("real", "transfer_opt"): [60, 61, 59],
                ("gradmm", "test"): [60, 60, 60], ("real", "test"): [50, 50, 50]})
    res = ST.claim_transfer(agg, cfg)
    assert res.margin == pytest.approx(np.mean([58 - 60 + 1, 58 - 61 + 1, 58 - 59 + 1]))  # opt is the worst
    assert res.n_seeds == 3
    assert "llama" in res.ours and "opt" in res.ours
    table = ST.make_table(agg, cfg)
    assert {"llama acc (%)", "opt acc (%)"} <= set(table.columns)
    with pytest.raises(KeyError):  # a transfer LM without results: the claim is n.a., not a number
        ST.claim_transfer(_agg({("gradmm", "transfer_llama"): [60]}), cfg)
    mini = _cfg("mini")
    assert ST.claim_transfer(agg, mini).margin is None and "n.a." in ST.claim_transfer(agg, mini).ours
    assert "llama acc (%)" not in ST.make_table(agg, mini).columns
    assert np.isfinite(res.margin)
