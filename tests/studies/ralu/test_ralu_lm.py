"""The local HF LLM: saved with save_pretrained, loaded with from_pretrained(dir); its confidence equals the
mean exp(logprob) recomputed by a forward pass; sampling streams do not depend on the batch; the
tokenizer round-trips gsm-lite text."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from icml25.studies.ralu import gsm_lite, tinylm
from icml25.studies.ralu.llm import LocalLM, Request, confidence, render_prompt

LM = {"n_embd": 16, "n_layer": 1, "n_head": 2, "n_ctx": 192, "steps": 3, "batch": 4, "lr": 0.003,
      "judge_per_item": 2, "p_corrupt": 0.5}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    train, _ = gsm_lite.split_templates(0.1, 0)
    items = gsm_lite.make_items(train, 30, 0, "t")
    out = tmp_path_factory.mktemp("lm")
    info = tinylm.train_lm(items, {"lm": LM}, 0, out)
    assert info["n_params"] > 0 and (out / "config.json").exists() and (out / "tokenizer.json").exists()
    return out


def _reqs(n, seed=0):
    rng = random.Random(seed)
    train, _ = gsm_lite.split_templates(0.1, 0)
    items = gsm_lite.make_items(train, n, 5, "e")
    out = []
    for i, it in enumerate(items):
        kind = ["program", "judge", "synth"][i % 3]
        fields = {"question": it["question"], "unit": "RUN `x = 1`", "path": ["RUN `x = 1`", "RUN `ans = x`"]}
        out.append(Request(kind, [], fields, f"k{i}-{rng.random()}", 12))
    return out


def test_confidence_is_the_mean_token_probability_of_a_forward_pass(model_dir):
    lm = LocalLM(model_dir, temperature=0.7, frequency_penalty=0.3, batch_size=8)
    seen = []
    decode = lm.decode
    lm.decode = lambda ids: (seen.append(list(ids)), decode(ids))[1]
    reqs = _reqs(5)
    replies = lm.generate(reqs)
    assert len(seen) == len(replies)
    for r, rep, ids in zip(reqs, replies, seen):
        assert rep.n_out == len(ids) == len(rep.logprobs)
        if not ids:
            continue
        ref = lm.sequence_logprobs(render_prompt(r.kind, r.fields), ids)
        want = 100 * sum(math.exp(x) for x in ref) / len(ref)
        assert confidence(rep) == pytest.approx(want, abs=1e-3)
        assert 0 < confidence(rep) <= 100


def test_a_request_samples_the_same_text_alone_or_in_a_batch(model_dir):
    lm = LocalLM(model_dir, temperature=0.7, frequency_penalty=0.3, batch_size=8)
    reqs = _reqs(6)
    together = [r.text for r in lm.generate(reqs)]
    alone = [lm.generate([r])[0].text for r in reqs[:3]]
    assert together[:3] == alone


def test_tokenizer_round_trips_gsm_lite_text(model_dir):
    lm = LocalLM(model_dir)
    train, _ = gsm_lite.split_templates(0.1, 0)
    for it in gsm_lite.make_items(train, 30, 0, "t"):  # the training text: every word is in the vocabulary
        assert lm.decode(lm.encode(it["program"])) == it["program"]  # what the model writes round-trips
        for text in (render_prompt("program", {"question": it["question"]}) + it["program"],
                     render_prompt("synth", {"question": it["question"], "path": units_text(it["program"])})):
            # known wart (see the page): the space before a role tag is its own piece, never in the vocabulary,
            # so it encodes as <unk> (the same in training and inference)
            want = text.replace(" [U]", "<unk>[U]").replace(" [A]", "<unk>[A]")
            assert lm.decode(lm.encode(text)) == want
    assert lm.decode(lm.encode(" Zyx has 12 pens .")).startswith("<unk> has 1")  # unseen words: <unk>, digits kept


def units_text(program):
    from icml25.studies.ralu.units import cfg_units

    return cfg_units(program)


def test_one_lm_per_seed_is_the_seed_own_and_the_one_its_runs_read(tmp_path, monkeypatch):
    """base_per_seed (mini): fit_base for run seed k trains the LM with seed k into that seed's base dir, which
    is the LM seed k's runs load; the shared mode trains seed 0's LM into base/seed0/ for every seed. Seeds 0
    and 1 give different LMs; seed 0's per-seed LM is the shared one, weight for weight."""
    pytest.importorskip("transformers")
    import torch
    from transformers import GPT2LMHeadModel

    from icml25.studies.ralu import llm, study

    monkeypatch.setattr(llm, "LocalLM", lambda path, *a, **k: Path(path))  # the path a run would load
    train, _ = gsm_lite.split_templates(0.1, 0)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(
        "".join(json.dumps(it) + "\n" for it in gsm_lite.make_items(train, 20, 0, "t")))
    cfg = {"lm": LM, "llm": {"kind": "local"}, "generation": {"temperature": 0.7, "frequency_penalty": 0.3}}
    shared = tmp_path / "shared"
    study.fit_base(cfg, tmp_path / "data", shared)
    per = {k: tmp_path / f"seed{k}" for k in (0, 1)}
    for k, d in per.items():
        study.fit_base({**cfg, "base_per_seed": True, "base_seed": k}, tmp_path / "data", d)
        assert set(json.loads((d / "info.json").read_text())) == {str(k)} and (d / "config.json").exists()
        assert llm.load_llm({**cfg, "base_per_seed": True}, d, k) == d
    assert llm.load_llm(cfg, shared, 1) == shared / "seed0"  # shared: every seed reads seed 0's LM
    w = {k: GPT2LMHeadModel.from_pretrained(d).state_dict() for k, d in {**per, "s": shared / "seed0"}.items()}
    assert all(torch.equal(w[0][n], w["s"][n]) for n in w[0])
    assert not all(torch.equal(w[0][n], w[1][n]) for n in w[0])
