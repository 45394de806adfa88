"""Issue 57's stand-in changes: the length-grouped batch gives the gradient of the one padded batch; the
clause-chain lengths of the config reach the generator; no training question is an evaluation question."""
from __future__ import annotations

import random

import pytest

from icml25.studies.ralu import data, gsm_lite, tinylm


def _batch(n=12, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):  # lengths 6-40 with prompts of 2-10 tokens: groups of very different padding
        L = rng.randint(6, 40)
        out.append(([rng.randrange(3, 50) for _ in range(L)], rng.randint(2, 5)))
    return out


@pytest.mark.parametrize("micro", [2, 4, 12])
def test_grouped_batch_gives_the_padded_batch_gradient(micro):
    pytest.importorskip("transformers")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=64, n_embd=16, n_layer=2, n_head=2,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    batch = _batch()
    # the reference: one tensor padded to the longest example, HF's own mean loss over response tokens
    L = max(len(ids) for ids, _ in batch)
    x = torch.full((len(batch), L), 0, dtype=torch.long)
    y = torch.full((len(batch), L), -100, dtype=torch.long)
    for j, (ids, np_) in enumerate(batch):
        x[j, :len(ids)] = torch.tensor(ids)
        y[j, np_:len(ids)] = torch.tensor(ids[np_:])
    model.zero_grad()
    ref = model(input_ids=x, labels=y).loss
    ref.backward()
    g_ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss, n = tinylm.batch_backward(model, batch, 0, micro)
    assert n == int((y[:, 1:] != -100).sum())
    assert loss == pytest.approx(float(ref.detach()), rel=1e-5)
    for a, b in zip(g_ref, (p.grad for p in model.parameters())):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_config_clause_lengths_reach_the_generator():
    cfg = {"data": {"held_out_frac": 0.1, "template_seed": 0, "n_clauses": [1, 2]}}
    train, held = data._splits(cfg)
    assert {len(t) for t in train + held} == {1, 2} and len(train) + len(held) == 8 + 8 * 7
    default = data._splits({"data": {"held_out_frac": 0.1, "template_seed": 0}})
    assert {len(t) for t in default[0]} == {2, 3}


def test_training_items_exclude_evaluation_questions(tmp_path):
    train_t, _ = gsm_lite.split_templates(0.1, 0, (1,))
    ev = gsm_lite.make_items(train_t, 30, 101, "e")
    # the same seed as the evaluation draw: without the exclusion every item would be an evaluation question
    items = gsm_lite.make_items(train_t, 40, 101, "t", exclude={e["question"] for e in ev})
    assert len(items) == 40 and not {i["question"] for i in items} & {e["question"] for e in ev}
    cfg = {"data": {"held_out_frac": 0.1, "template_seed": 0, "n_clauses": [1], "seed": 101, "n_train": 40,
                    "sets": ["gsm_lite"], "eval_sets": {"gsm_lite": {"source": "gsm_lite", "n": 30, "seed": 101}}}}
    data.download(cfg, tmp_path)
    tr = data.read_jsonl(tmp_path / "train_gsm_lite.jsonl")
    te = data.read_jsonl(tmp_path / "gsm_lite.jsonl")
    assert len(tr) == 40 and not {i["question"] for i in tr} & {e["question"] for e in te}
