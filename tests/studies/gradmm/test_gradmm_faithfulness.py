"""Faithfulness of GRADMM's pieces on a tiny GPT-2 built here (seconds): the z-step, the lambda-step, the
lm_head-only gradient (closed form = autograd, double backward included), the real-sequence fixed point,
the cosine gain of ADMM, the DP clip and noise, the banned vocabulary, the filter and the n-gram check."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from icml25.studies.gradmm import admm as A  # noqa: E402
from icml25.studies.gradmm import lm, matching as M, synthetic as S  # noqa: E402

TEXTS = ["the film is a great story of love and loss", "a bad movie with a dull plot and weak acting",
         "an honest and moving drama", "the jokes fall flat and the pace is slow", "it was great fun to watch",
         "the cast is good but the script is bad", "a warm and funny film about a family",
         "boring and far too long for its own good"] * 6


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    tok = lm.train_tokenizer(TEXTS, 300, d, [" It was", " great", " bad", " It", " was"])
    model = lm.build_model({"d_model": 16, "n_layer": 1, "n_head": 2, "ctx": 64}, len(tok), 0)
    ids = np.asarray(sum((tok(t)["input_ids"] + [tok.eos_token_id] for t in TEXTS), []))
    lm.pretrain(model, ids, 30, 4, 16, 0.01, 0)
    task = lm.Task(tok, " It was", {0: " bad", 1: " great"})
    M.freeze_all_but_lm_head(model)
    banned = M.banned_tokens(tok, model.get_input_embeddings().weight.shape[0])
    return model, tok, task, banned


def _matcher(tiny, seqs, label=1):
    model, tok, task, banned = tiny
    g, _, _ = M.target_gradient(model, seqs, task.label_ids[label])
    return A.Matcher(model, task, g, task.label_ids[label], banned, prefix=[task.eos])


def _allowed_seq(tiny, text):
    model, tok, task, banned = tiny
    ids = [t for t in tok(text)["input_ids"] if not banned[t]]
    return ids + task.prompt_ids


def test_only_lm_head_requires_grad_and_closed_form_equals_autograd(tiny):
    model, tok, task, _ = tiny
    assert [n for n, p in model.named_parameters() if p.requires_grad] == ["lm_head.weight"]
    assert model.get_output_embeddings().weight is not model.get_input_embeddings().weight  # untied, as phi
    x = (0.3 * torch.randn(3, 7, 16)).requires_grad_(True)
    auto = M.autograd_head_grad(model, x, task.label_ids[1], create_graph=True)[0]
    h = M.last_hidden(model, x)[None]
    closed = M.closed_form_head_grad(model, h, task.label_ids[1])[0][0]
    torch.testing.assert_close(closed, auto, rtol=1e-4, atol=1e-6)
    # the double backward: d/dx of a function of the gradient agrees too
    w = torch.randn_like(auto)
    ga, = torch.autograd.grad((auto * w).sum(), x, retain_graph=True)
    gc, = torch.autograd.grad((closed * w).sum(), x)
    torch.testing.assert_close(gc, ga, rtol=1e-3, atol=1e-6)


def test_z_step_picks_lm_best_token_inside_topk_outside_banned(tiny):
    model, tok, task, banned = tiny
    m = _matcher(tiny, [task.encode(t) for t in TEXTS[:4]])
    L, k = 8, 5
    v = torch.randn(4, L, 16)
    ids = m.project(v, k)
    P = m.P
    assert torch.equal(ids[:, -P:], torch.tensor(task.prompt_ids).expand(4, P))  # prompt unchanged
    cand = m.topk(v[:, :L - P], k)
    for r in range(4):
        prefix = [task.eos]
        for i in range(L - P):
            t = int(ids[r, i])
            assert t in cand[r, i].tolist() and not banned[t]
            # the LM's most probable token among the top-k, given the decoded prefix (no cache: a fresh forward)
            logits = model(input_ids=torch.tensor([prefix])).logits[0, -1]
            best = max(cand[r, i].tolist(), key=lambda c: float(logits[c]))
            assert t == best
            prefix.append(t)
    # the cosine top-k is right: the real nearest allowed token ranks first
    vn = v / v.norm(dim=-1, keepdim=True)
    En = m.E / m.E.norm(dim=1, keepdim=True)
    cos = vn[:, :L - P] @ En.T
    cos[..., torch.as_tensor(banned)] = -2
    assert torch.equal(cand[..., 0], cos.argmax(-1))


def test_lambda_step_is_exactly_rho_times_x_minus_z(tiny):
    model, tok, task, _ = tiny
    m = _matcher(tiny, [task.encode(t) for t in TEXTS[:4]])
    cfg = {"outer": 3, "inner": 2, "rho": 0.5, "lr": 0.008, "lr_decay": 0.9, "topk": 4, "grad_clip": 1.0,
           "init_candidates": 2, "init_size": 0.5}
    res = A.run_admm(m, 2, 2, 7, cfg, torch.Generator().manual_seed(0), trace=True)
    assert len(res["trace"]) == 3
    for st in res["trace"]:
        assert torch.equal(st["lam_before"] + 0.5 * (st["x"] - st["z"]), st["lam_after"])
        assert torch.equal(st["z"], m.E[st["z_ids"]])
    assert not torch.equal(res["trace"][0]["lam_after"], res["trace"][0]["lam_before"])


def test_real_sequence_is_a_fixed_point(tiny):
    model, tok, task, banned = tiny
    seq = _allowed_seq(tiny, TEXTS[0])
    m = _matcher(tiny, [seq])
    x = m.E[torch.tensor(seq)][None, None]
    assert float(m.rec_loss(x)[0]) < 1e-5           # D(grad(real), g(real)) ~ 0
    assert float(m.rec_loss_ids(torch.tensor(seq)[None, None])[0]) < 1e-5
    assert m.project(x[0], 1).tolist() == [seq]     # the nearest-token projection returns the sequence
    cand = m.topk(x[0, :, :len(seq) - m.P], 6)
    assert all(seq[i] in cand[0, i].tolist() for i in range(len(seq) - m.P))  # ... and is a top-k candidate
    cfg = {"outer": 2, "inner": 3, "rho": 0.1, "lr": 0.008, "lr_decay": 0.9, "topk": 1, "grad_clip": 1.0,
           "init_candidates": 1, "init_size": -1}
    res = A.run_admm(m, 1, 1, len(seq), cfg, torch.Generator().manual_seed(0), x0=x)
    assert res["ids"][0, 0].tolist() == seq and res["final_cos"] > 1 - 1e-5


def test_admm_raises_the_gradient_cosine_over_the_random_init(tiny):
    model, tok, task, _ = tiny
    m = _matcher(tiny, [task.encode(t) for t in TEXTS[:8]])
    cfg = {"outer": 6, "inner": 6, "rho": 0.1, "lr": 0.03, "lr_decay": 0.9, "topk": 8, "grad_clip": 1.0,
           "init_candidates": 2, "init_size": 0.5}
    res = A.run_admm(m, 4, 3, 9, cfg, torch.Generator().manual_seed(1))
    assert res["final_cos"] > res["cos_curve"][0] + 0.01
    emb = A.run_embedding_only(m, 4, 3, 9, cfg, torch.Generator().manual_seed(1))
    assert emb["embed_cos"] > emb["cos_curve"][0]  # the continuous relaxation matches better than its start


def test_dp_clips_per_example_and_adds_noise_of_the_official_sigma(tiny):
    model, tok, task, _ = tiny
    seqs = [task.encode(t) for t in TEXTS[:10]]
    dp = {"c": 0.05, "epsilon": 0.5, "delta": 1e-4}
    clean, norms, _ = M.target_gradient(model, seqs, task.label_ids[0], dp={**dp, "epsilon": 1e9})
    assert max(norms) > dp["c"]  # clipping is active
    for s in seqs:
        g = M.clip([x.detach() for x in M.autograd_head_grad(model, torch.tensor([s]), task.label_ids[0])], dp["c"])
        assert float(torch.sqrt(sum((x ** 2).sum() for x in g))) <= dp["c"] * (1 + 1e-5)
    gen = torch.Generator().manual_seed(0)
    noisy, _, sigma = M.target_gradient(model, seqs, task.label_ids[0], dp=dp, generator=gen)
    assert sigma == pytest.approx((0.05 / 10) * math.sqrt(2 * math.log(1.25 / 1e-4)) / 0.5)
    # noise = noisy - (clipped mean, recomputed with the tiny-noise run); chi-square test of its variance
    sig_tiny = M.dp_sigma(dp["c"], 10, 1e9, dp["delta"])
    resid = (noisy[0] - clean[0]).flatten().double()
    n = resid.numel()
    stat = float((resid ** 2).sum()) / sigma ** 2
    assert abs(stat - n) < 5 * math.sqrt(2 * n) + n * (sig_tiny / sigma) ** 2 * 10
    assert abs(float(resid.mean())) < 5 * sigma / math.sqrt(n)
    # the paper's setting: epsilon 0.05, delta 1e-4, C 1, n 50; the eps > 1 branch is a different formula
    assert M.dp_sigma(1.0, 50, 0.05, 1e-4) == pytest.approx(0.02 * math.sqrt(2 * math.log(12500)) / 0.05)
    assert M.dp_sigma(1.0, 50, 2.0, 1e-4) != pytest.approx(0.02 * math.sqrt(2 * math.log(12500)) / 2.0)


def test_banned_vocabulary(tiny):
    model, tok, task, banned = tiny
    for t in range(len(tok)):
        s = tok.decode([t])
        if t == tok.eos_token_id or any(c in s for c in "<>()[]{}-_'") or any(c.isdigit() for c in s):
            assert banned[t], s
    assert not banned[task.label_ids[1]] and not banned[tok(" film")["input_ids"][0]]
    assert banned[tok(",")["input_ids"][0]] and banned[tok(".")["input_ids"][0]]


def test_filter_keeps_consistent_first_top_n_and_drops_duplicates():
    cands = [{"text": f"t{i}", "label": i % 2, "metric": float(i)} for i in range(8)]
    cands.append({"text": "t0", "label": 0, "metric": -5.0})
    score = [-1, 1, 1, -1, -1, 1, 1, -1, 3]   # t2, t6 (label 0) and t3, t7 (label 1) look inconsistent
    kept = S.select(cands, score, 2, calibrate=False)
    assert [k["text"] for k in kept] == ["t0", "t4", "t1", "t5"]
    assert all(k["consistent"] for k in kept)


def test_longest_common_run_detects_a_copied_span():
    real = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [1, 2, 3]]
    assert S.max_overlap([[0, 1, 2, 0]], real) == 2
    planted = [99, 5, 6, 7, 8, 9, 10, 11, 12, 98]   # an 8-token copy
    assert S.max_overlap([[0], planted], real) == 8


def test_max_overlap_equals_the_pairwise_dynamic_programme():
    rng = np.random.default_rng(0)
    for _ in range(40):
        syn = [list(rng.integers(0, 4, rng.integers(0, 12))) for _ in range(rng.integers(1, 5))]
        real = [list(rng.integers(0, 4, rng.integers(0, 12))) for _ in range(rng.integers(1, 5))]
        want = max((S.longest_common_run(s, r) for s in syn for r in real), default=0)
        assert S.max_overlap(syn, real) == want


def test_admm_reuses_the_last_projection_only_when_it_is_the_best_x(tiny, monkeypatch):
    """The final projection is skipped exactly when best x is the last x; the result equals a fresh one."""
    model, tok, task, banned = tiny
    seqs = [task.encode(t, 8) for t in TEXTS[:4]]
    cfg = {"outer": 2, "inner": 2, "rho": 0.1, "lr": 0.008, "lr_decay": 0.9, "topk": 5, "grad_clip": 1.0,
           "init_candidates": 2, "init_size": 1.0}
    m = _matcher(tiny, seqs)
    calls = []
    real_project = m.project
    monkeypatch.setattr(m, "project", lambda v, k, lm_guided=True: calls.append(1) or real_project(v, k, lm_guided))
    res = A.run_admm(m, 2, 2, 6, cfg, torch.Generator().manual_seed(0), trace=True)
    fresh = real_project(res["trace"][-1]["x"].reshape(4, 6, -1), 5).view(2, 2, 6)
    assert len(calls) in (1 + 2 * 2, 1 + 2 * 2 + 1)
    if len(calls) == 1 + 2 * 2:  # reused: the last x was the best, and its projection is the answer
        assert torch.equal(res["ids"], fresh)
    assert res["final_cos"] == pytest.approx(float((1 - m.rec_loss_ids(res["ids"])).mean()), abs=0)
