"""Faithfulness of the DoGE and RegMix-lite baselines: update rules, invariances, regression and search."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from icml25.studies.chameleon import baselines, lm  # noqa: E402

TINY = {"d_model": 32, "n_layer": 2, "n_head": 2, "ctx": 32}


# ---- DoGE ---------------------------------------------------------------------------------------------

def test_doge_scores_are_the_official_formula():
    torch.manual_seed(0)
    G = torch.randn(4, 50, dtype=torch.float64)
    lr = 1e-3
    s = baselines.doge_scores(G, lr, dw_min=-1e9, dw_max=1e9)
    M = G @ G.T
    expect = torch.tensor([lr * sum(float(M[i, j]) for j in range(4) if j != i) for i in range(4)], dtype=torch.float64)
    expect = expect / G.norm(dim=1).mean()
    torch.testing.assert_close(s, expect)
    # clipped to [lr dw_min, lr dw_max] (official defaults 0 and 5)
    c = baselines.doge_scores(G, lr, 0.0, 5.0)
    assert float(c.min()) >= 0.0 and float(c.max()) <= 5 * lr + 1e-15
    torch.testing.assert_close(c, expect.clamp(0.0, 5 * lr))


def test_doge_identical_domains_stay_uniform():
    torch.manual_seed(1)
    g = torch.randn(1, 30, dtype=torch.float64)
    alpha = torch.full((5,), 0.2, dtype=torch.float64)
    for _ in range(20):
        alpha, s = baselines.doge_step(alpha, g.repeat(5, 1), 1e-3, mu=0.01)
    torch.testing.assert_close(alpha, torch.full((5,), 0.2, dtype=torch.float64))
    assert float(s[0]) > 0  # the scores were not trivially zero


def test_doge_aligned_domain_gains_weight_conflicting_one_loses():
    # domain 0 points along the others' mean direction, domain 3 slightly against them
    base = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [-0.2, 0.0, 1.0]], dtype=torch.float64)
    alpha0 = torch.full((4,), 0.25, dtype=torch.float64)
    alpha, s = baselines.doge_step(alpha0, base, lr_t=1e-3, mu=0.01)
    assert float(alpha.sum()) == pytest.approx(1.0)
    assert int(torch.argmax(alpha)) == 0 and float(alpha[0]) > float(alpha[2]) > float(alpha[1]) > 0.25
    assert int(torch.argmin(alpha)) == 3 and float(alpha[3]) < 0.25 and float(s[3]) == 0.0  # negative alignment clipped at dw_min = 0
    # multiplicative form: alpha_i ∝ alpha_i exp(score_i / mu)
    expect = alpha0 * torch.exp(s / 0.01)
    torch.testing.assert_close(alpha, expect / expect.sum())


def test_doge_proxy_training_same_data_everywhere_gives_uniform_and_6ND():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    a = rng.integers(10, 200, size=2000)
    model = lm.build(TINY, 320, 0)
    hp = {"ctx": 32, "lr": 0.003, "wd": 0.1, "warmup": 0.1}
    # three copies of one domain: the windows drawn differ per domain, but the gradients agree in expectation,
    # so the time-averaged weights stay near uniform
    res = baselines.train_doge(model, [a, a, a], 32 * 2 * 3 * 4, hp, {"per_domain_batch": 2}, seed=0)
    w = res["weights"]
    assert w.sum() == pytest.approx(1.0) and res["steps"] == 4
    assert np.abs(w - 1 / 3).max() < 0.1
    assert res["flops"] == pytest.approx(6 * lm.n_params(model) * res["tokens"])
    # a domain of pure noise vs two copies of structured text: the copies align, the noise does not -> noise loses
    noise = rng.integers(0, 320, size=2000)
    text = np.tile(np.arange(50, 90), 60)
    model2 = lm.build(TINY, 320, 0)
    res2 = baselines.train_doge(model2, [text, text, noise], 32 * 2 * 3 * 10, hp, {"per_domain_batch": 2}, seed=0)
    assert res2["weights"][2] < 1 / 3 < min(res2["weights"][:2])


# ---- RegMix-lite --------------------------------------------------------------------------------------

def test_dirichlet_mixtures_are_on_the_simplex_and_follow_the_prior():
    rng = np.random.default_rng(0)
    prior = np.array([0.7, 0.2, 0.05, 0.05])
    W = baselines.dirichlet_mixtures(prior, 4000, rng)
    assert W.shape == (4000, 4) and np.all(W >= 0)
    np.testing.assert_allclose(W.sum(1), 1.0, atol=1e-12)
    m = W.mean(0)  # the mean of Dirichlet(c p') is p' = prior**0.5 normalised, whatever the strength
    p = prior ** 0.5 / (prior ** 0.5).sum()
    np.testing.assert_allclose(m, p, atol=0.03)


def test_regression_recovers_a_planted_linear_surface_and_search_finds_its_minimum():
    rng = np.random.default_rng(1)
    prior = np.ones(5) / 5
    c_true = np.array([3.0, 2.5, 4.0, 1.0, 3.5])
    W = baselines.dirichlet_mixtures(prior, 8, rng)
    y = W @ c_true
    c = baselines.fit_linear(W, y)
    np.testing.assert_allclose(c, c_true, atol=1e-8)
    # a noisy surface is still ranked correctly
    c_noisy = baselines.fit_linear(W, y + rng.normal(0, 1e-3, size=len(y)))
    assert int(np.argmin(c_noisy)) == 3
    found = baselines.search_mixture(c, prior, rng, n_search=20000, top_k=50)
    w = found["weights"]
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    assert int(np.argmax(w)) == 3 and w[3] > 0.6  # mass on the domain with the lowest loss
    # the chosen mixture beats uniform and the mean Dirichlet sample under the fitted model
    assert found["predicted_loss"] < float(prior @ c_true) - 1.0
    # a permuted surface gives the permuted answer (no position bias)
    perm = np.array([3, 0, 4, 1, 2])
    f2 = baselines.search_mixture(c[perm], prior, np.random.default_rng(2), n_search=20000, top_k=50)
    assert int(np.argmax(f2["weights"])) == int(np.where(perm == 3)[0][0])


def test_regmix_end_to_end_uses_validation_not_test_and_counts_flops():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    arrays = [rng.integers(10 + 60 * i, 90 + 60 * i, size=1500) for i in range(3)]
    hp = {"ctx": 32, "batch": 4, "lr": 0.003, "wd": 0.1, "warmup": 0.1}
    rcfg = {"runs": 3, "tokens": 256, "val_frac": 0.1, "val_windows": 3, "n_search": 500, "top_k": 10}
    r = baselines.regmix(TINY, 320, arrays, np.array([1.0, 2.0, 3.0]), hp, rcfg, seed=0)
    assert r["weights"].sum() == pytest.approx(1.0) and np.all(r["weights"] >= 0)
    assert r["mixtures"].shape == (3, 3) and r["val_losses"].shape == (3, 3)
    np.testing.assert_allclose(r["target"], r["val_losses"].mean(1))
    n = lm.n_params(lm.build(TINY, 320, 0))
    val_tokens = sum(baselines.eval_tokens(len(a) - int(len(a) * 0.9), 32, 3) for a in arrays)
    assert val_tokens == 3 * 3 * 32
    assert r["flops"] == pytest.approx(3 * (6 * n * 256 + 2 * n * val_tokens))
    # the validation windows are the tail of each training array: a model scored there agrees with the record
    m = lm.build(TINY, 320, 100)
    lm.train(m, [a[:int(len(a) * 0.9)] for a in arrays], r["mixtures"][0], 256, hp, 100)
    import math
    got = [math.log(lm.perplexity(m, a[int(len(a) * 0.9):], 32, 3)) for a in arrays]
    np.testing.assert_allclose(got, r["val_losses"][0], rtol=1e-5)


def _toy_data(tmp_path, seed: int):
    """A prepared data dir of 3 pretraining domains a-c + new domain d (disjoint token ranges); returns (dir, toks)."""
    from icml25.studies.chameleon import data_prep

    rng = np.random.default_rng(seed)
    toks = {d: {"train": rng.integers(10 + 60 * i, 90 + 60 * i, size=1500),
                "test": rng.integers(10 + 60 * i, 90 + 60 * i, size=300)} for i, d in enumerate("abcd")}
    data = tmp_path / "data"
    data.mkdir()
    data_prep.train_tokenizer(["hello world, some text to learn merges from " * 20], 300).save(str(data / "tokenizer.json"))
    np.savez(data / "tokens.npz", **{f"{d}.{s}": v[s].astype(np.uint16) for d, v in toks.items() for s in v})
    meta = {"pretrain_domains": ["a", "b", "c"], "new_domains": ["d"], "vocab_size": 320,
            "domains": {d: {"natural_chars": 1000 * (i + 1)} for i, d in enumerate("abcd")}}
    (data / "domains.json").write_text(json.dumps(meta))
    return data, toks


def test_fit_base_records_doge_and_regmix_with_their_flops(tmp_path):
    from icml25.studies.chameleon import mixing

    torch.set_num_threads(1)
    data, toks = _toy_data(tmp_path, 0)
    P = ["a", "b", "c"]
    cfg = {"base_seed": 0, "model": TINY, "train": {"ctx": 32, "batch": 4, "lr": 0.003, "wd": 0.1, "warmup": 0.1},
           "proxy_tokens": 256, "doremi_tokens": 256, "doremi": {},
           "doge_tokens": 32 * 2 * 3 * 2, "doge": {"per_domain_batch": 2},
           "regmix": {"runs": 3, "tokens": 128, "val_windows": 2, "n_search": 300, "top_k": 10},
           "embed": {"windows": 4, "ctx": 32},
           "chameleon": {"lambda": 0.1, "lambda_sweep": [0.1], "normalise_omega": True, "pt_temperature": 5.0,
                         "ft_temperature": 0.2},
           "finetune": {"domains": ["d"]}}
    out = tmp_path / "base"
    out.mkdir()
    rec = mixing.fit_base(cfg, data, out)
    n = rec["n_params"]
    assert rec["flops"]["doge"] == pytest.approx(6 * n * 32 * 2 * 3 * 2)
    val = sum(baselines.eval_tokens(len(toks[d]["train"]) - int(len(toks[d]["train"]) * 0.9), 32, 2) for d in P)
    assert rec["flops"]["regmix"] == pytest.approx(3 * (6 * n * 128 + 2 * n * val))
    for m in ("doge", "regmix"):
        w = np.asarray(rec[m]["weights"])
        assert w.shape == (3,) and w.sum() == pytest.approx(1.0) and np.all(w >= 0)
    # RegMix's Dirichlet prior is the natural size distribution; its regression target is the mean val loss
    np.testing.assert_allclose(rec["regmix"]["target"], np.mean(rec["regmix"]["val_losses"], axis=1))
    # the study's train hook reads these mixtures
    from icml25.studies.chameleon import study

    base = json.loads((out / "weights.json").read_text())
    assert study.mixture("doge", base) == rec["doge"]["weights"]
    assert study.mixture("regmix", base) == rec["regmix"]["weights"]


def test_fit_base_on_two_workers_equals_one(tmp_path):
    """fit_base spreads its proxies over the stage's cores; every task seeds itself, so the weights, curves and
    embeddings are bit-identical to the serial run."""
    from icml25.studies.chameleon import mixing

    torch.set_num_threads(1)
    data, toks = _toy_data(tmp_path, 1)
    cfg = {"base_seed": 0, "model": TINY, "train": {"ctx": 32, "batch": 4, "lr": 0.003, "wd": 0.1, "warmup": 0.1},
           "proxy_tokens": 256, "doremi_tokens": 256, "doremi": {}, "doge_tokens": 384, "doge": {},
           "regmix": {"runs": 4, "tokens": 128, "val_windows": 2, "n_search": 300, "top_k": 10},
           "embed": {"windows": 4, "ctx": 32},
           "chameleon": {"lambda": 0.1, "lambda_sweep": [0.1, 1.0], "normalise_omega": True, "pt_temperature": 5.0,
                         "ft_temperature": 0.2},
           "finetune": {"domains": ["d"]}}
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"base{workers}"
        out.mkdir()
        mixing.fit_base(cfg, data, out, workers=workers)
        outs.append(out)
    for name in ("weights.json", "curves.json"):
        assert (outs[0] / name).read_text() == (outs[1] / name).read_text()
    e1, e2 = np.load(outs[0] / "embeddings.npz"), np.load(outs[1] / "embeddings.npz")
    assert e1.files == e2.files and all(np.array_equal(e1[k], e2[k]) for k in e1.files)
    # and the serial RegMix composition is the same computation as the split one
    rec = json.loads((outs[1] / "weights.json").read_text())
    one = baselines.regmix(TINY, 320, [toks[d]["train"] for d in "abc"], np.array([1000.0, 2000.0, 3000.0]),
                           cfg["train"], cfg["regmix"], seed=3)
    np.testing.assert_array_equal(np.asarray(rec["regmix"]["weights"]), one["weights"])
