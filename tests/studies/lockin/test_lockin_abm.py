"""Faithfulness of the Section 4 stand-in: a real HF causal LM that learns the users' corpus, the
save_pretrained/from_pretrained path, and the lambda2 = 0 ablation."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from icml25.studies.lockin import abm  # noqa: E402
from icml25.studies.lockin import data as D  # noqa: E402

torch.set_num_threads(1)
TOPICS = ["alpha", "beta"]
AI = {"n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 32, "pretrain_steps": 150, "pretrain_lr": 0.003,
      "batch_size": 32, "lr": 0.003, "initial_steps": 30, "steps_per_round": 1, "max_new_tokens": 6}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    out = tmp_path_factory.mktemp("lockin_base")
    corpus = D.pretrain_corpus(TOPICS, 600, np.random.default_rng(0))
    rec = abm.create_base(AI, TOPICS, corpus, out, seed=0)
    return out, rec


def _answers(model, tok, n=200):
    ans = abm.sample_answers(model, tok, TOPICS, n, AI["max_new_tokens"])
    return np.array([[abm.parse_level(a) for a in per] for per in ans])  # (topics, users)


def test_saved_model_reloads_identically_through_from_pretrained(base):
    out, rec = base
    assert (out / "model" / "config.json").exists() and rec["pretrain_loss_last"] < rec["pretrain_loss_first"]
    m1, tok1, _ = abm.load_ai(out)
    m2, tok2, _ = abm.load_ai(out)
    ids = torch.tensor([tok1(abm._prompt_text(tok1, D.QUESTION.format(topic="alpha"), False), add_special_tokens=False)["input_ids"]])
    assert tok1.convert_ids_to_tokens(ids[0].tolist())[-3:] == ["?", "answer", ":"]
    with torch.no_grad():
        assert torch.equal(m1(ids).logits, m2(ids).logits)


def test_ai_learns_the_corpus_distribution_not_its_mean(base):
    """Fine-tuned on a bimodal corpus (levels 2 and 8 on 'alpha', 6 on 'beta'), the AI's sampled answers
    are bimodal at 0.2/0.8 with almost nothing at the mean 0.5; the base model's answers are spread out."""
    out, _ = base
    torch.manual_seed(0)
    model, tok, _ = abm.load_ai(out)
    before = _answers(model, tok)
    rng = np.random.default_rng(1)
    corpus = [D.dialogue("alpha", lvl, int(rng.integers(4))) for lvl in [2] * 60 + [8] * 60]
    corpus += [D.dialogue("beta", 6, int(rng.integers(4))) for _ in range(120)]
    opt = torch.optim.AdamW(model.parameters(), lr=AI["lr"])
    losses = abm.finetune(model, tok, corpus, 60, 32, opt, rng)
    assert losses[-1] < losses[0]
    after = _answers(model, tok)
    a = after[0][~np.isnan(after[0])]
    assert np.isnan(after).mean() < 0.05
    assert np.mean(np.isclose(a, 0.2)) > 0.3 and np.mean(np.isclose(a, 0.8)) > 0.3
    assert np.mean(np.isclose(a, 0.5)) < 0.05
    assert np.mean(np.isclose(after[1], 0.6)) > 0.8  # topic-specific: beta is answered from beta's data
    b = before[0][~np.isnan(before[0])]
    assert len(np.unique(np.round(b, 1))) >= 6  # the base model holds no opinion


def test_no_trust_keeps_beliefs_and_entropy_for_50_rounds(base):
    out, _ = base
    b0 = D.population(20, len(TOPICS), np.random.default_rng(2), {})
    cfg = {"ai": AI, "loop": {"rounds": 50, "lambda2": 0.3}}
    res = abm.run_loop("no_trust", b0, TOPICS, out, cfg, seed=0, progress=False)
    start = [h["entropy"] for h in res["history"][0]]
    end = [h["entropy"] for h in res["history"][-1]]
    assert len(res["history"]) == 51
    assert np.allclose(end, start, rtol=0.05)
    assert np.array_equal(res["beliefs"], b0)
    assert len(res["losses"]) == AI["initial_steps"] + 49 * AI["steps_per_round"]  # the AI kept training


def test_trust_moves_users_toward_the_ai(base):
    """One round with lambda2 = 1 and an AI fine-tuned on the round-0 corpus: every parsed answer replaces the belief."""
    out, _ = base
    b0 = np.full((30, len(TOPICS)), 0.9)
    cfg = {"ai": {**AI, "initial_steps": 40}, "loop": {"rounds": 1, "lambda2": 1.0}}
    res = abm.run_loop("full_loop", b0, TOPICS, out, cfg, seed=0, progress=False)
    b = res["beliefs"]
    assert np.all(np.isclose(b * 10, np.rint(b * 10)))  # beliefs are now stated levels
    assert np.mean(np.isclose(b, 0.9)) > 0.6  # the AI learned "nine" from the corpus


def test_population_is_bimodal():
    b = D.population(2000, 4, np.random.default_rng(0), {})
    for k in range(4):
        h = np.histogram(b[:, k], bins=10, range=(0, 1))[0]
        assert h[1] + h[2] > 5 * h[5] and h[7] + h[8] > 5 * h[5]


def test_lora_starts_as_the_base_and_trains_only_the_adapters(base):
    """The full scale's preference learning (peft LoRA): the wrapped model's logits equal the base model's
    before training (B = 0), fine-tuning moves only adapter weights, and the loss falls."""
    pytest.importorskip("peft")
    out, _ = base
    torch.manual_seed(0)
    model, tok, _ = abm.load_ai(out)
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.tensor([tok(abm._prompt_text(tok, D.QUESTION.format(topic="beta"), False), add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        base_logits = model(ids).logits.clone()
    lora = abm.with_lora(model, {"r": 4, "alpha": 8, "target_modules": ["c_attn"]})
    with torch.no_grad():
        assert torch.allclose(lora(ids).logits, base_logits, atol=1e-6)
    trainable = [p for p in lora.parameters() if p.requires_grad]
    assert 0 < sum(p.numel() for p in trainable) < 0.2 * sum(p.numel() for p in lora.parameters())
    rng = np.random.default_rng(2)
    corpus = [D.dialogue("beta", 9, int(rng.integers(4))) for _ in range(64)]
    losses = abm.finetune(lora, tok, corpus, 25, 32, torch.optim.AdamW(trainable, lr=0.01), rng)
    assert losses[-1] < losses[0]
    merged = lora.merge_and_unload()  # folds B A into the targeted weights: only those may differ from the base
    changed = [k for k, v in merged.state_dict().items() if k in ref and not torch.equal(v, ref[k])]
    assert changed and all("c_attn.weight" in k for k in changed), changed
