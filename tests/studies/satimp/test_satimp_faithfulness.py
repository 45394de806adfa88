"""Faithfulness of the SatImp study: properties only a correct implementation of the paper's objectives,
its Extraction Strength and its calibration has."""
import math

import numpy as np
import pytest
import torch

from icml25.studies.satimp import data as D
from icml25.studies.satimp import lm
from icml25.studies.satimp import losses as L
from icml25.studies.satimp import unlearn as U

torch.set_num_threads(1)
PROMPT = {"question_start": "question : ", "question_end": " ", "answer_tag": "answer :", "bos": True}


@pytest.fixture(scope="module")
def world():
    """A tiny random Llama, its word-level tokenizer and a few TOFU-lite items, encoded."""
    gen = D.generate({"data_seed": 3, "n_authors": 6, "n_world": 10,
                      "split_authors": {"forget": 2, "val_forget": 1, "retain_val": 1, "retain_eval": 1}})
    splits = gen["splits"]
    tok = lm.build_word_tokenizer(lm.all_texts(splits, PROMPT))
    torch.manual_seed(0)
    model = lm.new_llama(tok, {"hidden": 32, "ffn": 64, "layers": 1, "heads": 2, "max_len": 48})
    enc = lm.encode(tok, splits["forget10"][:8], PROMPT)
    return model, tok, splits, enc


def _loss_grad(model, enc, kind, hp):
    model.zero_grad()
    l, m, imp = lm.token_losses(model, enc)
    loss = L.reweighted_ga(l, m, L.token_weights(kind, l, m, imp, hp))
    loss.backward()
    return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])


@pytest.mark.parametrize("b1,b2,other,hp", [
    (0.0, 0.0, "ga", {}),
    (2.0, 0.0, "simsat", {"beta": 2.0}),
    (0.0, 3.0, "simimp", {"beta": 3.0}),
])
def test_satimp_reduces_to_ga_simsat_simimp(world, b1, b2, other, hp):
    model, _, _, enc = world
    la, ga = _loss_grad(model, enc, "satimp", {"beta1": b1, "beta2": b2})
    lb, gb = _loss_grad(model, enc, other, hp)
    assert torch.allclose(la, lb, atol=1e-6) and torch.allclose(ga, gb, atol=1e-6)
    # and SatImp with the paper's betas is a different objective
    lc, gc = _loss_grad(model, enc, "satimp", {"beta1": 5.0, "beta2": 0.1})
    assert not torch.allclose(gc, gb, atol=1e-6)


def test_gradient_is_that_of_detached_weights(world):
    """grad L_f = -(1/|T|) sum w grad l with w held constant; the undetached objective has another gradient."""
    model, _, _, enc = world
    b1, b2 = 1.0, 0.5
    loss, g = _loss_grad(model, enc, "satimp", {"beta1": b1, "beta2": b2})
    model.zero_grad()
    l, m, imp = lm.token_losses(model, enc)
    p = torch.exp(-l)
    w_const = (p.detach() ** b1 * (1 - p.detach()) ** b2) * m
    (-(w_const * l).sum() / m.sum()).backward()
    g_ref = torch.cat([q.grad.flatten() for q in model.parameters()])
    assert float((g - g_ref).norm() / g_ref.norm()) < 1e-5
    model.zero_grad()
    l, m, _ = lm.token_losses(model, enc)
    p = torch.exp(-l)
    (-((p ** b1 * (1 - p).clamp(min=1e-12) ** b2) * m * l).sum() / m.sum()).backward()
    g_undetached = torch.cat([q.grad.flatten() for q in model.parameters()])
    assert float((g - g_undetached).norm() / g_undetached.norm()) > 1e-2


@pytest.mark.parametrize("b1,b2", [(5.0, 0.1), (1.0, 1.0), (2.0, 6.0)])
def test_satimp_weight_peaks_at_beta1_over_sum(b1, b2):
    p = torch.linspace(1e-4, 1 - 1e-4, 20001)
    l = -torch.log(p)[None]
    w = L.token_weights("satimp", l, torch.ones_like(l, dtype=torch.bool), torch.zeros_like(l),
                        {"beta1": b1, "beta2": b2})[0]
    assert abs(float(p[w.argmax()]) - b1 / (b1 + b2)) < 1e-3


def test_hard_selection_and_granularity():
    l = torch.tensor([[0.1, 2.0, 0.5, 3.0, 0.0], [1.0, 0.2, 0.3, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], dtype=torch.bool)
    top = L.token_weights("topk", l, mask, None, {"q": 0.5})
    bot = L.token_weights("bottomk", l, mask, None, {"q": 0.5})
    # the official rule: threshold = the answer's median loss (1.25; 0.3), TopK l > it, BottomK l < it
    assert top[0].tolist() == [0, 1, 0, 1, 0] and top[1].tolist() == [1, 0, 0, 0, 0]
    assert bot[0].tolist() == [1, 0, 1, 0, 0] and bot[1].tolist() == [0, 1, 0, 0, 0]
    inst = L.token_weights("simsat_instance", l, mask, None, {"beta": 2.0})
    assert torch.allclose(inst[0, :4], torch.full((4,), math.exp(-2 * 5.6)))  # p(y|x)^beta, sum of 4 losses
    batch = L.token_weights("simsat_batch", l, mask, None, {"beta": 2.0})
    assert torch.allclose(batch[0, 0], torch.tensor((math.exp(-2 * 5.6) + math.exp(-2 * 1.5)) / 2))
    grp = L.token_weights("simsat_group", l, mask, None, {"beta": 1.0, "group": 2})
    p = torch.exp(-l[0, :4]).sort(descending=True).values
    assert torch.allclose(grp[0, 0], (p[0] + p[1]) / 2) and torch.allclose(grp[0, 3], (p[2] + p[3]) / 2)
    assert float(grp[0, 4]) == 0.0


def test_bottomk_keeps_70_percent_at_q_03_and_topk_30():
    """Official ga_bottomk: l < quantile_{1-q}: at q = 0.3 the bottom 70% of each answer (not 30%)."""
    torch.manual_seed(0)
    l = torch.rand(3, 12) + 0.01
    mask = torch.ones_like(l, dtype=torch.bool)
    mask[1, 10:] = False
    bot = L.token_weights("bottomk", l * mask, mask, None, {"q": 0.3})
    top = L.token_weights("topk", l * mask, mask, None, {"q": 0.3})
    for i, n in enumerate((12, 10, 12)):
        kept = int(bot[i].sum())
        assert kept == math.floor(0.7 * (n - 1)) + 1  # the tokens strictly below the 70% quantile
        assert 0.6 <= kept / n <= 0.8 and int(top[i].sum()) == n - kept  # distinct losses: a partition
        order = torch.argsort(l[i, :n])
        assert bot[i, order[:kept]].tolist() == [1.0] * kept  # the lowest losses


def test_official_reductions_on_a_hand_example():
    """Instance/batch: per-answer token sums averaged over answers; ImpT/TopK/BottomK: unnormalised sums;
    SimSat/SatImp/GA: mean over the batch's answer tokens (the official code's reductions)."""
    l = torch.tensor([[0.2, 0.4, 0.6, 0.0], [1.0, 0.5, 0.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    imp = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.float32)
    spec = {"objective": "weighted", "beta": 1.0}
    li = l.detach()
    w1, w2 = math.exp(-1.2), math.exp(-1.5)
    got = U.forget_loss({**spec, "kind": "simsat_instance"}, l, mask, imp)
    assert float(got.detach()) == pytest.approx(-(w1 * 1.2 + w2 * 1.5) / 2, rel=1e-6)  # / answers, not / 5 tokens
    got = U.forget_loss({**spec, "kind": "simsat_batch"}, l, mask, imp)
    assert float(got.detach()) == pytest.approx(-((w1 + w2) / 2) * (1.2 + 1.5) / 2, rel=1e-6)
    got = U.forget_loss({**spec, "kind": "impt"}, l, mask, imp)
    assert float(got.detach()) == pytest.approx(-(0.4 + 0.6 + 1.0), rel=1e-6)  # a sum, no division
    got = U.forget_loss({**spec, "kind": "ga"}, l, mask, imp)
    assert float(got.detach()) == pytest.approx(-2.7 / 5, rel=1e-6)
    p = torch.exp(-li)
    got = U.forget_loss({**spec, "kind": "simsat"}, l, mask, imp)
    assert float(got.detach()) == pytest.approx(float(-(p * li * mask).sum() / 5), rel=1e-6)
    got = U.forget_loss({**spec, "kind": "topk", "q": 0.5}, l, mask, imp)
    assert float(got.detach()) == pytest.approx(-(0.6 + 1.0), rel=1e-6)  # above each answer's median, summed


class _Recorder(torch.optim.AdamW):
    """AdamW that records the gradient (norm and vector) it is asked to step on."""
    seen: list = []

    def step(self, closure=None):
        g = torch.cat([p.grad.flatten() for grp in self.param_groups for p in grp["params"] if p.grad is not None])
        _Recorder.seen.append(g.clone())
        return super().step(closure)


def _unlearn_grads(monkeypatch, model, enc, spec, ucfg, retain=None, seed=0):
    _Recorder.seen = []
    monkeypatch.setattr(torch.optim, "AdamW", _Recorder)
    orig = U.state(model)
    ref = None
    if spec["objective"] == "npo":
        import copy
        ref = copy.deepcopy(model).eval()
    U.unlearn(model, orig, ref, enc, retain, spec, 1e-3, ucfg, seed)
    lm.interpolate(model, orig, orig, 0.0)
    return list(_Recorder.seen)


def test_gradients_are_clipped_at_norm_one(world, monkeypatch):
    model, _, _, enc = world
    spec = U.spec_for({"hp": {}}, "impt")  # an unnormalised sum: large gradients
    ucfg = {"epochs": 1, "batch_size": 4}
    raw = _unlearn_grads(monkeypatch, model, enc, spec, ucfg)
    assert max(float(g.norm()) for g in raw) > 1.0  # clipping has something to do
    clipped = _unlearn_grads(monkeypatch, model, enc, spec, {**ucfg, "max_grad_norm": 1.0})
    assert all(float(g.norm()) <= 1.0 + 1e-5 for g in clipped)
    assert float(clipped[0].norm()) == pytest.approx(1.0, rel=1e-4)
    cos = torch.nn.functional.cosine_similarity(raw[0], clipped[0], dim=0)
    assert float(cos) > 0.9999  # the direction is kept, only the norm is cut


def test_npo_gd_uses_the_official_coefficients(world, monkeypatch):
    """NPO+GD: the step's gradient is that of 0.1375 x NPO(beta 2.5) + 1.0 x retain NLL (forget_base.yaml)."""
    import yaml
    from pathlib import Path

    raw = yaml.safe_load((Path(__file__).parents[3] / "config/studies/satimp.yaml").read_text())["common"]
    spec = U.spec_for(raw, "npo_gd")
    assert (spec["forget"], spec["retain"], spec["beta"]) == (0.1375, 1.0, 2.5)
    assert U.spec_for(raw, "npo")["beta"] == 2.5 and U.spec_for(raw, "satimp_gd")["retain"] == 0.1
    assert raw["unlearn"]["max_grad_norm"] == 1.0 and raw["eval"]["retain_fraction"] == 0.9
    assert raw["unlearn"]["lr_select"] == "shared"
    import copy

    model, enc = copy.deepcopy(world[0]), world[3]
    retain = lm.batch_slice(enc, slice(4, 8))
    ucfg = {"epochs": 1, "batch_size": 4}
    got = _unlearn_grads(monkeypatch, model, enc, spec, ucfg, retain=retain)[0]
    # the first step by hand: the same minibatch order and retain draw (seeded generator)
    g = torch.Generator().manual_seed(0)
    idx = torch.randperm(enc["input_ids"].shape[0], generator=g)[:4]
    ridx = torch.randint(0, 4, (4,), generator=g)
    # U.unlearn's reference is a copy of the (perturbed) model: NPO's ratio is 0 at step one
    model.zero_grad()
    l, m, _ = lm.token_losses(model, lm.batch_slice(enc, idx))
    rl, rm, _ = lm.token_losses(model, lm.batch_slice(retain, ridx))
    (0.1375 * L.npo(l, m, l.detach(), 2.5) + 1.0 * L.nll(rl, rm)).backward()
    want = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert float((got - want).norm() / want.norm()) < 1e-5
    model.zero_grad()
    l, m, _ = lm.token_losses(model, lm.batch_slice(enc, idx))
    rl, rm, _ = lm.token_losses(model, lm.batch_slice(retain, ridx))
    (L.npo(l, m, l.detach(), 2.5) + L.nll(rl, rm)).backward()
    other = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert float((got - other).norm() / other.norm()) > 1e-2  # coefficient 1 would be another step


class Oracle(torch.nn.Module):
    """Next-token logits from a table of prefixes: argmax = the continuation of a known sequence, except
    at positions listed in `wrong` (prefix length -> token)."""

    def __init__(self, seqs, vocab, wrong=None):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.table = {tuple(s[:i]): s[i] for s in seqs for i in range(1, len(s))}
        self.vocab, self.wrong = vocab, wrong or {}

    def forward(self, input_ids, attention_mask=None):
        B, T = input_ids.shape
        out = torch.zeros(B, T, self.vocab)
        for b in range(B):
            for t in range(T):
                pre = tuple(input_ids[b, : t + 1].tolist())
                nxt = self.wrong.get(t + 1, self.table.get(pre, 0)) if pre in self.table else 0
                out[b, t, nxt] = 10.0
        return type("O", (), {"logits": out + self.w * 0})()


def test_es_teacher_forcing_equals_greedy_definition(world):
    model, tok, splits, _ = world
    items = splits["forget10"][:6] + splits["world"][:3]
    enc = lm.encode(tok, items, PROMPT)
    for seed in range(3):  # small random models
        torch.manual_seed(seed)
        rnd = lm.new_llama(tok, {"hidden": 16, "ffn": 16, "layers": 1, "heads": 2, "max_len": 48}).eval()
        with torch.no_grad():
            for p in rnd.parameters():
                p.mul_(4.0)  # sharper, more varied argmax
        tf = lm.es_scores(rnd, enc)
        greedy = np.array([lm.es_greedy(rnd, tok, it, PROMPT) for it in items])
        assert np.allclose(tf, greedy)
    # a perfectly memorising model: ES = 1; one wrong token inside the answer cuts ES to the suffix after it
    seqs = [enc["input_ids"][i][enc["attention_mask"][i].bool()].tolist() for i in range(len(items))]
    oracle = Oracle(seqs, len(tok))
    assert np.allclose(lm.es_scores(oracle, enc), 1.0)
    assert all(lm.es_greedy(oracle, tok, it, PROMPT) == 1.0 for it in items[:2])
    n_prompt = int((enc["labels"][0] != -100).nonzero()[0])
    alen = int(enc["answer_len"][0])
    bad = Oracle(seqs[:1], len(tok), wrong={n_prompt + 2: 1})  # the 3rd answer token is predicted wrongly
    es = lm.es_scores(bad, lm.batch_slice(enc, slice(0, 1)))[0]
    assert es == pytest.approx((alen - 3) / alen)
    assert lm.es_greedy(bad, tok, items[0], PROMPT) == pytest.approx(es)


def _flat_grad(model, loss):
    model.zero_grad()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def test_npo_gradient_tends_to_ga(world):
    model, tok, _, enc = world
    with torch.no_grad():
        l_ref = lm.token_losses(model, enc)[0]
    torch.manual_seed(1)
    moved = lm.new_llama(tok, {"hidden": 32, "ffn": 64, "layers": 1, "heads": 2, "max_len": 48})  # != reference
    cos = {}
    for beta in (1e-4, 5.0):
        l, m, _ = lm.token_losses(moved, enc)
        g_npo = _flat_grad(moved, L.npo(l, m, l_ref, beta))
        l, m, imp = lm.token_losses(moved, enc)
        g_ga = _flat_grad(moved, L.reweighted_ga(l, m, L.token_weights("ga", l, m, imp, {})))
        cos[beta] = float(torch.nn.functional.cosine_similarity(g_npo, g_ga, dim=0))
    assert cos[1e-4] > 0.99
    assert cos[5.0] < cos[1e-4]  # the limit is not trivial: far from beta -> 0 NPO reweights sequences


def test_importance_masks_are_the_annotated_values():
    """ImpT's mask is the generator's annotation of the value words (fixed before any model exists)."""
    gen = D.generate({"data_seed": 1, "n_authors": 12, "n_world": 20,
                      "split_authors": {"forget": 2, "val_forget": 2, "retain_val": 2, "retain_eval": 2}})
    splits = gen["splits"]
    tok = lm.build_word_tokenizer(lm.all_texts(splits, PROMPT))
    items = splits["forget10"]
    enc = lm.encode(tok, items, PROMPT)
    for i, it in enumerate(items):
        words = it["answer"].split()
        flagged = [w for w, f in zip(words, it["fact_flags"]) if f]
        assert " ".join(flagged) == it["critical"]
        toks = enc["input_ids"][i][enc["importance"][i] > 0].tolist()
        assert tok.convert_ids_to_tokens(toks) == flagged
    # author-disjoint splits; forget05 inside forget10
    a = gen["author_splits"]
    groups = [set(a[k]) for k in ("forget10", "val_forget", "retain_val", "retain_eval", "retain_train")]
    assert sum(map(len, groups)) == 12 and len(set().union(*groups)) == 12
    assert set(a["forget05"]) <= set(a["forget10"])
    # the official annotation rule (full scale, no word flags) marks every annotated fact token
    for i, it in enumerate(items):
        enc2 = lm.encode(tok, [dict(it, fact_flags=None)], PROMPT)
        exact = set(enc["importance"][i].nonzero().flatten().tolist())
        assert exact <= set(enc2["importance"][0].nonzero().flatten().tolist())


def test_calibration_picks_the_largest_mix_meeting_the_retain_bar(world):
    _, tok, splits, _ = world
    retain = lm.encode(tok, splits["retain_eval"], PROMPT)
    torch.manual_seed(0)
    model = lm.new_llama(tok, {"hidden": 32, "ffn": 64, "layers": 1, "heads": 2, "max_len": 48})
    lm.fit(model, retain, 120, 10, 1e-2, 0)  # partly memorised: 0 < retain ES
    orig = U.state(model)
    unl = {k: v + 0.3 * torch.randn_like(v) for k, v in orig.items()}
    lm.interpolate(model, orig, unl, 0.0)
    es0 = float(lm.es_scores(model, retain).mean())
    assert es0 > 0.2
    lm.interpolate(model, orig, unl, 1.0)
    assert all(torch.equal(p, unl[n]) for n, p in model.named_parameters())
    target = 0.95 * es0
    alpha, es_a, _ = U.calibrate(model, orig, unl, retain, target, 0.1, 0.02)
    assert 0 < alpha < 1
    assert es_a >= target and float(lm.es_scores(model, retain).mean()) == pytest.approx(es_a)
    # every grid point above alpha that the search visits misses the bar: the coarse points above the
    # coarse point found, and the fine points between alpha and the coarse point above it
    cf = math.floor(alpha * 10 + 1e-9) / 10
    above = [round(cf + 0.1 * k, 10) for k in range(1, 11) if cf + 0.1 * k <= 1 + 1e-9]
    above += [round(alpha + 0.02 * k, 10) for k in range(1, 5) if alpha + 0.02 * k < min(cf + 0.1, 1 + 1e-9) - 1e-9]
    for a in above:
        lm.interpolate(model, orig, unl, a)
        assert float(lm.es_scores(model, retain).mean()) < target, a
    lm.interpolate(model, orig, orig, 0.0)
