"""Faithfulness tests for the SAND study core (layer, baselines, methods, loaders).

Each test is designed to fail on a plausible wrong implementation; the whole file runs in well
under a minute on one core.
"""
from __future__ import annotations

import gzip
import math
import struct

import numpy as np
import pytest
import torch

from icml25.studies.sand import baselines as B
from icml25.studies.sand import datasets as D
from icml25.studies.sand.layer import SANDLayer
from icml25.studies.sand.methods import METHODS, run_method
from icml25.studies.sand.mlp import MLP

torch.set_num_threads(1)


def _toy_clf(n=300, d=12, seed=0, informative=(0, 1, 2)):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (X[:, list(informative)].sum(1) > 0).astype(np.int64)
    cut1, cut2 = int(0.6 * n), int(0.8 * n)
    return {"X_train": X[:cut1], "y_train": y[:cut1], "X_val": X[cut1:cut2], "y_val": y[cut1:cut2],
            "X_test": X[cut2:], "y_test": y[cut2:], "relevant": np.array(informative, np.int64)}


# ------------------------------------------------------------------------------------------
# SAND layer
# ------------------------------------------------------------------------------------------
def test_constraint_holds_after_every_forward_and_gains_nonnegative():
    torch.manual_seed(0)
    n, k = 20, 5
    layer = SANDLayer(n, k, sigma=1.5)
    model = MLP(n, 16, 3, front=layer)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)  # large lr: w moves a lot per step
    X = torch.randn(64, n)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()
    moved = False
    for _ in range(25):
        out = model(X)
        w = layer.w.detach().clone()
        # written back: stored parameter == normalised gains, sum a^2 = k, a >= 0
        assert abs(float((w.double() ** 2).sum()) - k) < 1e-5
        assert bool((w >= 0).all())
        loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        assert layer.w.grad is not None and float(layer.w.grad.abs().sum()) > 0
        opt.step()
        a_now = layer.gains()
        assert abs(float((a_now.double() ** 2).sum()) - k) < 1e-5
        moved |= bool((layer.w.detach() - w).abs().max() > 1e-3)
    assert moved, "optimiser should change the gains"
    # gains are not all equal any more, yet every forward restored the constraint
    assert float(layer.gains().std()) > 1e-3


def test_init_gains_are_sqrt_k_over_n():
    n, k = 37, 6
    layer = SANDLayer(n, k)
    expected = math.sqrt(k / n)
    assert torch.allclose(layer.w.detach(), torch.full((n,), expected))
    layer.eval()
    x = torch.randn(4, n)
    out = layer(x)
    assert torch.allclose(layer.w.detach(), torch.full((n,), expected), atol=1e-7)
    assert torch.allclose(out, x * expected, atol=1e-6)


def test_training_noise_variance_is_sigma2_one_minus_a_squared():
    torch.manual_seed(1)
    n, k, sigma = 6, 3, 1.5
    layer = SANDLayer(n, k, sigma=sigma)
    with torch.no_grad():  # non-uniform gains, one above 1 before clipping
        layer.w.copy_(torch.tensor([1.7, 0.9, 0.6, 0.3, 0.1, 0.0]))
    a = layer.gains()
    assert float(a.std()) > 0.1
    layer.train()
    N = 200_000
    out = layer(torch.zeros(N, n)).detach()
    var = out.double().var(0)
    target = (sigma * (1 - a.double())) ** 2
    # relative s.e. of a variance estimate ~ sqrt(2/N) = 0.3%; allow 3% (+ small abs for a ~ 1)
    assert torch.allclose(var, target, rtol=0.03, atol=1e-3), (var, target)
    assert float(out.detach().double().mean(0).abs().max()) < 0.02
    # fresh noise on every call
    out2 = layer(torch.zeros(8, n))
    out3 = layer(torch.zeros(8, n))
    assert not torch.equal(out2, out3)


def test_eval_mode_is_exactly_a_times_x():
    torch.manual_seed(2)
    n, k = 10, 4
    layer = SANDLayer(n, k)
    with torch.no_grad():
        layer.w.copy_(torch.rand(n))
    layer.eval()
    x = torch.randn(32, n)
    a = layer.gains()
    out1 = layer(x)
    assert torch.equal(out1, x * a)  # no noise, no bias
    # the forward wrote a back into w; another eval forward again gives exactly x * a(w)
    assert torch.equal(layer.w.detach(), a)
    a2 = layer.gains()
    assert torch.equal(layer(x), x * a2)
    assert torch.allclose(a2, a, atol=0.2)


def test_topk_masking_keeps_exactly_k_and_renormalises():
    torch.manual_seed(3)
    n, k = 15, 4
    layer = SANDLayer(n, k)
    with torch.no_grad():
        layer.w.copy_(torch.rand(n) * 0.9 + 0.05)
    a = layer.gains()
    idx = layer.select_topk()
    expect = np.sort(np.argsort(-a.numpy(), kind="stable")[:k])
    assert idx.tolist() == expect.tolist()
    a2 = layer.gains()
    assert int((a2 > 0).sum()) == k
    assert abs(float((a2.double() ** 2).sum()) - k) < 1e-5
    assert abs(float((layer.w.detach().double() ** 2).sum()) - k) < 1e-5
    # the masked features stay zero after further forwards, in train and eval
    layer.train()
    layer(torch.randn(5, n))
    layer.eval()
    out = layer(torch.randn(5, n))
    mask = torch.ones(n, dtype=torch.bool)
    mask[idx] = False
    assert float(out[:, mask].abs().max()) == 0.0
    assert int((layer.gains() > 0).sum()) == k


def test_planted_madelon_like_recall_and_polarisation(tmp_path):
    D.acquire("madelon_like", tmp_path / "raw", {"data_seed": 0})
    D.preprocess("madelon_like", tmp_path / "raw", tmp_path / "d.npz", {"data_seed": 0})
    data = D.load_npz(tmp_path / "d.npz")
    assert data["relevant"].tolist() == list(range(10))
    k = D.DATASETS["madelon_like"]["k"]
    res = run_method("sand", data, "clf", k, {"epochs": 80}, seed=0)
    m = res["metrics"]
    assert m["recall_relevant"] >= 0.8, m
    assert abs(m["n_gain_gt_half"] - k) <= 1, m
    assert m["n_selected"] == k and m["retrain_epochs"] == 0
    gains = np.array(res["gains"])
    assert abs((gains ** 2).sum() - k) < 1e-4
    # SAND without retraining clearly beats chance on this task
    assert m["test_metric"] > 0.6


# ------------------------------------------------------------------------------------------
# baselines
# ------------------------------------------------------------------------------------------
def test_stg_gate_range_and_penalty():
    from scipy.stats import norm

    torch.manual_seed(4)
    g = B.STGGate(50, sigma=0.5)
    assert torch.allclose(g.mu.detach(), torch.full((50,), 0.5))
    with torch.no_grad():
        g.mu.copy_(torch.linspace(-1.5, 1.5, 50))
    g.train()
    z = torch.stack([g.gates() for _ in range(200)])
    assert float(z.min()) >= 0.0 and float(z.max()) <= 1.0
    assert 0 < float((z == 0).float().mean()) < 1 and 0 < float((z == 1).float().mean()) < 1
    # training gates are noisy: mu + N(0, 0.5^2) before clipping -> check on the interior band
    inner = (g.mu.detach() > -0.2) & (g.mu.detach() < 1.2)
    assert float(z[:, inner].std(0).mean()) > 0.1
    g.eval()
    assert torch.equal(g.gates(), g.mu.detach().clamp(0, 1))
    lam = 0.37
    expect = lam * norm.cdf(g.mu.detach().double().numpy() / 0.5).sum()
    assert abs(float(g.penalty(lam)) - expect) < 1e-4
    assert g.n_open() == int((g.mu > 0).sum())


@pytest.mark.parametrize("task", ["clf", "reg"])
def test_anova_matches_selectkbest(task):
    from sklearn.feature_selection import SelectKBest, f_classif, f_regression

    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 25)).astype(np.float32)
    y = X[:, 3] - 2 * X[:, 7] + 0.5 * X[:, 11] + 0.3 * rng.standard_normal(200)
    y = (y > 0).astype(np.int64) if task == "clf" else y.astype(np.float32)
    data = {"X_train": X, "y_train": y}
    for k in (1, 3, 8):
        sel, _ = B.select_anova(data, task, k)
        ref = SelectKBest(f_classif if task == "clf" else f_regression, k=k).fit(X, y).get_support(indices=True)
        assert sel.tolist() == sorted(ref.tolist())


def test_random_k_is_seeded_and_valid():
    a, _ = B.select_random(100, 10, seed=7)
    b, _ = B.select_random(100, 10, seed=7)
    c, _ = B.select_random(100, 10, seed=8)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()
    assert len(set(a.tolist())) == 10 and a.min() >= 0 and a.max() < 100


def test_stg_selects_informative_features_on_toy():
    data = _toy_clf(n=400, d=12)
    res = run_method("stg", data, "clf", 3, {"epochs": 25, "stg_trials": 3}, seed=0)
    m = res["metrics"]
    assert m["n_selected"] == 3 and m["retrain_epochs"] == 25
    assert m["epochs_total"] == 25 * m["stg_trials"] + 25
    assert m["recall_relevant"] >= 2 / 3


# ------------------------------------------------------------------------------------------
# run_method contract and determinism
# ------------------------------------------------------------------------------------------
def _strip(res):
    m = {k: v for k, v in res["metrics"].items() if k != "cpu_seconds"}
    return m, res["selected"], res["gains"], res["curves"]


@pytest.mark.parametrize("method", ["sand", "stg", "random"])
def test_run_method_deterministic(method):
    data = _toy_clf(n=200, d=10)
    hp = {"epochs": 3, "stg_trials": 2}
    r1 = run_method(method, data, "clf", 3, hp, seed=11)
    r2 = run_method(method, data, "clf", 3, hp, seed=11)
    assert _strip(r1) == _strip(r2)
    r3 = run_method(method, data, "clf", 3, hp, seed=12)
    assert _strip(r1) != _strip(r3)


def test_run_method_contract_all_methods():
    data = _toy_clf(n=200, d=10)
    hp = {"epochs": 2, "stg_trials": 1, "lassonet_n_iters": (3, 2)}
    for method in METHODS:
        r = run_method(method, data, "clf", 3, hp, seed=0)
        m = r["metrics"]
        for key in ("test_metric", "val_metric", "epochs_total", "retrain_epochs", "cpu_seconds", "n_selected"):
            assert key in m and isinstance(m[key], float), (method, key)
        assert 0.0 <= m["test_metric"] <= 1.0
        assert ("recall_relevant" in m) == (method != "all")
        if method == "stg_paper":  # no k: as many features as gates stay open
            assert len(r["selected"]) == m["stg_n_open"] == m["n_selected"]
        else:
            assert len(r["selected"]) == (10 if method == "all" else 3)
        assert m["retrain_epochs"] == (0 if method in ("sand", "stg_paper", "all") else 2)
        assert (r["gains"] is not None) == (method == "sand")
        names = {c["metric"] for c in r["curves"]}
        assert {"train_loss", "val_metric"} <= names, (method, names)
        assert sum(c["metric"] == "train_loss" for c in r["curves"]) == 2  # per epoch of the final net
        if method == "sand":
            assert "gain_polarisation" in m and "n_gain_gt_half" in m


def test_regression_uses_mae():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((150, 6)).astype(np.float32)
    y = (X[:, 0] * 2).astype(np.float32)
    data = {"X_train": X[:100], "y_train": y[:100], "X_val": X[100:125], "y_val": y[100:125],
            "X_test": X[125:], "y_test": y[125:]}
    r = run_method("all", data, "reg", 2, {"epochs": 1}, seed=0)
    # after 1 epoch of a fresh net the MAE is near E|y| (~1.6), certainly not an accuracy in [0,1]
    assert r["metrics"]["test_metric"] > 0.3


# ------------------------------------------------------------------------------------------
# dataset plumbing
# ------------------------------------------------------------------------------------------
def test_idx_and_uci_madelon_parsers(tmp_path):
    imgs = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    blob = struct.pack(">I", 0x0803) + struct.pack(">III", 2, 3, 4) + imgs.tobytes()
    (tmp_path / "i.gz").write_bytes(gzip.compress(blob))
    assert np.array_equal(D.read_idx(tmp_path / "i.gz"), imgs)
    labs = np.array([3, 1], np.uint8)
    (tmp_path / "l").write_bytes(struct.pack(">I", 0x0801) + struct.pack(">I", 2) + labs.tobytes())
    assert np.array_equal(D.read_idx(tmp_path / "l"), labs)
    (tmp_path / "madelon_train.data").write_text("1 2 3 \n4 5 6 \n")
    (tmp_path / "madelon_train.labels").write_text("1\n-1\n")
    X, y, Xt, yt = D.load_full("madelon", tmp_path)
    assert X.shape == (2, 3) and y.tolist() == [1, 0] and Xt is None


def test_preprocess_deterministic_and_standardised(tmp_path):
    D.acquire("breast_cancer", tmp_path / "raw", {})
    p1 = D.preprocess("breast_cancer", tmp_path / "raw", tmp_path / "a.npz", {"data_seed": 3})
    p2 = D.preprocess("breast_cancer", tmp_path / "raw", tmp_path / "b.npz", {"data_seed": 3})
    a, b = D.load_npz(p1), D.load_npz(p2)
    for key in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test"):
        assert np.array_equal(a[key], b[key])
    assert a["X_train"].dtype == np.float32 and a["y_train"].dtype == np.int64
    assert np.allclose(a["X_train"].mean(0), 0, atol=1e-4) and np.allclose(a["X_train"].std(0), 1, atol=1e-3)
    assert a["relevant"].size == 0
    n = sum(len(a[k]) for k in ("y_train", "y_val", "y_test"))
    assert n == 569


def test_fashion_checksum_verification(tmp_path):
    src = D.FASHION_DIR
    if not (src / "t10k-labels-idx1-ubyte.gz").exists():
        with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
            D.acquire("fashion", tmp_path, {"fashion_dir": str(tmp_path / "none")})
        return
    assert D.verify_fashion_file(src / "t10k-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz") in (
        "gz_md5", "content_md5")
    bad = tmp_path / "t10k-labels-idx1-ubyte.gz"
    bad.write_bytes(gzip.compress(b"\x00\x00\x08\x01" + b"\x00" * 8))
    with pytest.raises(ValueError):
        D.verify_fashion_file(bad, "t10k-labels-idx1-ubyte.gz")
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        D.acquire("fashion", tmp_path / "out", {"fashion_dir": str(tmp_path / "none")})


# ------------------------------------------------------------------------------------------
# STG, the paper's protocol (stg_paper): fixed lambda, the gated network scored, no k
# ------------------------------------------------------------------------------------------
def test_stg_paper_scores_the_gated_network_without_retraining(monkeypatch):
    """Its accuracy is the gated network's own evaluation: rebuilding that one training (same seed
    stream) and evaluating it gives the same numbers; no retraining function is ever called."""
    from icml25.studies.sand import methods as Mth
    from icml25.studies.sand.mlp import as_tensors, default_hidden, evaluate

    data = _toy_clf(n=300, d=12)
    hp = {"epochs": 6}

    def no_retrain(*a, **k):
        raise AssertionError("stg_paper must not retrain a network")

    monkeypatch.setattr(Mth, "_train_eval_subset", no_retrain)
    res = run_method("stg_paper", data, "clf", 3, hp, seed=4)
    m = res["metrics"]
    assert m["retrain_epochs"] == 0 and m["epochs_total"] == 6 and m["stg_trials"] == 1
    assert sum(c["metric"] == "train_loss" for c in res["curves"]) == 6  # one training, 6 epochs

    full = {**Mth.DEFAULT_HP, **hp}
    Mth._seed_all(4, 1)
    gate, model, _ = B.stg_paper_train(data, "clf", default_hidden(12), full)
    te = as_tensors(data["X_test"], data["y_test"], "clf")
    va = as_tensors(data["X_val"], data["y_val"], "clf")
    assert m["test_metric"] == evaluate(model, *te, "clf")
    assert m["val_metric"] == evaluate(model, *va, "clf")
    assert res["selected"] == np.flatnonzero(gate.mu.detach().numpy() > 0).tolist()


def test_stg_paper_has_no_k_constraint():
    """The open gates are whatever lambda leaves: the same run for every k; lambda 0 keeps every gate open,
    a large lambda closes more than a small one."""
    data = _toy_clf(n=300, d=12)
    runs = {k: run_method("stg_paper", data, "clf", k, {"epochs": 8}, seed=0) for k in (1, 3, 9)}
    assert runs[1]["selected"] == runs[3]["selected"] == runs[9]["selected"]
    assert runs[1]["metrics"]["test_metric"] == runs[9]["metrics"]["test_metric"]
    m = runs[3]["metrics"]
    assert m["n_selected"] == m["stg_n_open"] == len(runs[3]["selected"])
    open0 = run_method("stg_paper", data, "clf", 3, {"epochs": 8, "stg_paper_lambda": 0.0}, seed=0)
    assert open0["metrics"]["stg_n_open"] == 12 and len(open0["selected"]) == 12
    fast = {"epochs": 15, "stg_gate_lr": 0.05}  # gates move fast enough to close within the test
    few = run_method("stg_paper", data, "clf", 3, {**fast, "stg_paper_lambda": 20.0}, seed=0)
    many = run_method("stg_paper", data, "clf", 3, {**fast, "stg_paper_lambda": 0.05}, seed=0)
    assert few["metrics"]["stg_n_open"] < many["metrics"]["stg_n_open"]


def test_stg_paper_uses_the_stg_package_scales(monkeypatch):
    """Fixed lambda on the package's mean-penalty scale (our sum penalty gets lambda / n), mu init
    0.5 + 0.01 N(0,1), and the package's weight decay: Adam L2 on the weights, mu decayed to 0.5 (not 0)."""
    from icml25.studies.sand import mlp as Mlp

    data = _toy_clf(n=200, d=10)
    seen = {}
    real_fit = B.fit

    def spy_fit(model, *a, penalty=None, param_lrs=None, weight_decay=0.0, **k):
        gate = model.front
        seen.update(mu0=gate.mu.detach().clone(), wd=weight_decay, lrs=param_lrs)
        with torch.no_grad():  # at mu = 0.5 the decay term vanishes: penalty = (lam/n) * n * Phi(1)
            saved = gate.mu.detach().clone()
            gate.mu.fill_(0.5)
            seen["pen_half"] = float(penalty())
            gate.mu.fill_(0.0)  # decay pulls towards 0.5: wd/2 * n * 0.25 on top of (lam/n) * n * Phi(0)
            seen["pen_zero"] = float(penalty())
            gate.mu.copy_(saved)
        return real_fit(model, *a, penalty=penalty, param_lrs=param_lrs, weight_decay=weight_decay, **k)

    monkeypatch.setattr(B, "fit", spy_fit)
    run_method("stg_paper", data, "clf", 3, {"epochs": 1, "stg_paper_lambda": 1.9}, seed=0)
    from scipy.stats import norm

    assert abs(seen["pen_half"] - 1.9 * norm.cdf(1.0)) < 1e-5  # the mean over 10 gates, times lambda
    assert abs(seen["pen_zero"] - (1.9 * 0.5 + 0.5 * 1e-3 * 10 * 0.25)) < 1e-5
    mu0 = seen["mu0"]
    assert abs(float(mu0.mean()) - 0.5) < 0.02 and 0.003 < float(mu0.std()) < 0.03
    assert seen["wd"] == 1e-3 and len(seen["lrs"]) == 1  # mu in its own group
    net = MLP(10, 4, 2, front=B.STGGate(10))
    opt = Mlp.make_adam(net, 1e-3, {net.front.mu: 1e-3}, 1e-3)
    assert [g["weight_decay"] for g in opt.param_groups] == [1e-3, 0.0]  # weights decay to 0, mu not
    assert opt.param_groups[1]["params"][0] is net.front.mu
    # our own protocol keeps its behaviour: no weight decay, the plain sum penalty
    seen.clear()
    run_method("stg", data, "clf", 3, {"epochs": 1, "stg_trials": 1}, seed=0)
    assert seen["wd"] == 0.0 and abs(seen["pen_half"] - math.sqrt(1e-3 * 1.0) * 10 * norm.cdf(1.0)) < 1e-5  # lambda = the bisection midpoint


def test_madelon500_recipe(tmp_path):
    """Madelon's size: 500 columns, the first 20 relevant (5 informative + 15 redundant), the rest noise."""
    from sklearn.feature_selection import f_classif

    D.acquire("madelon500", tmp_path, {"data_seed": 0, "madelon_n_samples": 600})
    with np.load(tmp_path / "madelon500.npz") as z:
        X, y, rel = z["X"], z["y"], z["relevant"]
    assert X.shape == (600, 500) and rel.tolist() == list(range(20))
    assert D.DATASETS["madelon500"]["k"] == 20
    # the redundant columns are linear combinations of the informative ones: rank 5 on the first 20
    assert np.linalg.matrix_rank(X[:, :20].astype(np.float64), tol=1e-3) == 5
    f = f_classif(X, y)[0]
    assert np.median(f[:20]) > np.percentile(f[20:], 90)


def _agg(cells):
    import pandas as pd

    rows = [{"method": m, "setting": s, "metric": "test_metric", "mean": float(np.mean(v)), "std": float(np.std(v)),
             "n": len(v), "seeds": list(range(len(v))), "values": list(v)} for (m, s), v in cells.items()]
    return pd.DataFrame(rows)


def test_madelon_claim_compares_with_the_paper_protocol():
    """madelon_vs_stg reads stg_paper (not our tuned-and-retrained stg) and takes the worse Madelon set."""
    from icml25.studies.sand import study as S

    cfg = {"data": {"datasets": ["madelon_like", "madelon500"]}, "n_features": {"madelon_like": 100, "madelon500": 500}}
    base = {("sand", "madelon_like"): [0.80, 0.81, 0.82], ("sand", "madelon500"): [0.70, 0.71, 0.72],
            ("stg", "madelon_like"): [0.99, 0.99, 0.99], ("stg", "madelon500"): [0.99, 0.99, 0.99]}
    res = S.claim_madelon_vs_stg(_agg({**base, ("stg_paper", "madelon_like"): [0.60] * 3,
                                       ("stg_paper", "madelon500"): [0.65] * 3}), cfg)
    assert res.verdict == "holds" and abs(res.margin - 0.06) < 1e-9  # worst set: 0.71 - 0.65
    res = S.claim_madelon_vs_stg(_agg({**base, ("stg_paper", "madelon_like"): [0.60] * 3,
                                       ("stg_paper", "madelon500"): [0.75] * 3}), cfg)
    assert res.verdict == "fails"  # madelon500 loses although madelon_like wins
    with pytest.raises(KeyError):
        S.claim_madelon_vs_stg(_agg(base), cfg)


# ------------------------------------------------------------------------------------------
# cost cuts that must not move a number (issue 31's budget)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("weight_decay,gate_lr", [(0.0, None), (1e-3, 0.01)])
def test_adam_step_is_torch_adam_bit_for_bit(weight_decay, gate_lr):
    """fit's adam_step calls torch's fused kernel directly: after many steps (an STG gate front with its
    own lr group, weight decay) parameters and Adam moments equal torch's own step exactly."""
    from icml25.studies.sand.mlp import _plain_fused, adam_step, loss_fn, make_adam

    X, y = torch.randn(64, 12), torch.randint(0, 3, (64,))
    runs = []
    for fast in (False, True):
        torch.manual_seed(0)
        gate = B.STGGate(12)
        model = MLP(12, 8, 3, front=gate)
        opt = make_adam(model, 1e-3, {gate.mu: gate_lr} if gate_lr else None, weight_decay)
        assert _plain_fused(opt)  # else this test would compare torch's step with itself
        for _ in range(50):
            if fast:
                loss_fn("clf", model(X), y).backward()
                adam_step(opt)
            else:
                opt.zero_grad(set_to_none=True)
                loss_fn("clf", model(X), y).backward()
                opt.step()
        moments = [opt.state[p][key] for p in model.parameters() for key in ("exp_avg", "exp_avg_sq", "step")]
        runs.append([t.detach().clone() for t in list(model.parameters()) + moments])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_stg_trials_cut_keeps_the_first_trials_and_the_retraining():
    """The mini runs two bisection trials where the third never won: trials 1-2 and the retraining of a
    lambda they chose must be the same as in a three-trial search (one RNG stream, retraining reseeded)."""
    data = _toy_clf(n=300, d=12)
    hp = {"epochs": 6, "stg_lambda_lo": 1e-3, "stg_lambda_hi": 0.1, "stg_gate_lr": 0.05}
    r2 = run_method("stg", data, "clf", 3, {**hp, "stg_trials": 2}, seed=3)
    r3 = run_method("stg", data, "clf", 3, {**hp, "stg_trials": 3}, seed=3)
    assert r3["metrics"]["stg_trials"] == 3 and r3["metrics"]["stg_lambda"] == pytest.approx(0.01)  # trial 1 won
    first = [c for c in r2["curves"] if c["metric"].startswith("stg_trial")]
    assert first and first == [c for c in r3["curves"] if c["metric"].startswith(("stg_trial0/", "stg_trial1/"))]
    assert r2["selected"] == r3["selected"]
    m2, m3 = r2["metrics"], r3["metrics"]
    assert [m2[k] for k in ("stg_lambda", "stg_n_open", "val_metric", "test_metric")] == \
        [m3[k] for k in ("stg_lambda", "stg_n_open", "val_metric", "test_metric")]
