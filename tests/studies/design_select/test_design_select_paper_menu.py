"""The paper's RNA menu (official designers.py / vae.py / rna-demo.ipynb): CbAS, DbAS, VAE, PEX, the CNN
predictor, and the 78-configuration menu of the full config, built at tiny sizes."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from icml25.core.config import effective, load_study
from icml25.studies.design_select import data_build as B
from icml25.studies.design_select import data_landscape as L
from icml25.studies.design_select import data_models as M
from icml25.studies.design_select import data_paper_designers as PD

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _full_estimated():
    return effective(load_study(ROOT, "design_select"), "full")["data"]["estimated"]


def _official_notebook_menu():
    """rna-demo.ipynb, cell 2, verbatim logic (fc = our 'mlp')."""
    adalead_thresholds = [0.2, 0.15, 0.1, 0.05, 0.01]
    biswas_temperatures = [0.02, 0.015, 0.01, 0.005]
    cbas_dbas_quantiles = np.arange(0.1, 0.91, 0.1)
    names = ["vae-ridge"]
    for m in ["ridge", "fc", "cnn"]:
        names += [f"adalead-{m}-{round(t, 4)}" for t in adalead_thresholds]
        names += [f"biswas-{m}-{round(t, 4)}" for t in biswas_temperatures]
        names.append(f"pex-{m}")
        names += [f"cbas-{m}-{round(q, 2)}" for q in cbas_dbas_quantiles]
        names += ([f"dbas-{m}-{round(q, 2)}" for q in cbas_dbas_quantiles] if m != "ridge"
                  else ["dbas-ridge-0.1", "dbas-ridge-0.2"])
    return names


def test_full_config_menu_is_the_papers_78_configurations():
    ours = [n for n, *_ in B.estimated_menu_names(_full_estimated())]
    official = [n.replace("-fc", "-mlp") for n in _official_notebook_menu()]
    assert len(official) == 78
    assert ours == official
    # smoke / mini keep the two-designer menu
    for scale, k in (("smoke", 4), ("mini", 12)):
        ec = effective(load_study(ROOT, "design_select"), scale)["data"]["estimated"]
        spec = B.estimated_menu_names(ec)
        assert len(spec) == k and {kind for _, kind, _, _ in spec} == {"adalead", "biswas"}


def _toy(n=300, Ls=14, seed=0):
    rng = np.random.default_rng(seed)
    seed_seq = rng.integers(0, 4, Ls)
    X = np.where(rng.random((n, Ls)) < 0.25, rng.integers(0, 4, (n, Ls)), seed_seq[None, :])
    beta = rng.normal(0, 0.3, (Ls, 4))
    y = beta[np.arange(Ls)[None, :], X].sum(1) + rng.normal(0, 0.05, n)
    return rng, seed_seq, X, y, beta


def test_full_menu_builds_at_tiny_sizes():
    rng, sidx, X, y, _ = _toy()
    X1 = L.onehot(X)
    models = {"ridge": M.Ridge.fit(X1, y, rng),
              "mlp": M.MLPEnsemble.fit(X1, y.astype(np.float32), seed=0, n_models=2, n_hidden=8, n_epoch=2),
              "cnn": M.CNNEnsemble.fit(X1, y, seq_len=X.shape[1], seed=0, n_models=2, n_filters=4, n_hidden=8,
                                       n_epoch=1)}
    ec = copy.deepcopy(_full_estimated())
    ec.update(n_design=5, n_step=2, trust_radius=4, max_mu=2.0)
    ec["bas"].update(n_iter=1, n_sample=20, n_epoch=1, n_init_epoch=1)
    designs, pred, names = B.estimated_menu(ec, models, X, y, sidx, rng)
    assert len(designs) == len(names) == 78
    assert names == [n for n, *_ in B.estimated_menu_names(ec)]
    assert all(D.shape == (5, X.shape[1]) and D.min() >= 0 and D.max() < 4 for D in designs)
    assert [B.PREDICTORS[i] for i in pred] == [p for _, _, p, _ in B.estimated_menu_names(ec)]


def test_bas_weights_are_the_closed_form():
    rng = np.random.default_rng(1)
    n = 200
    mu, sigma = rng.normal(0.3, 0.1, n), rng.uniform(0.01, 0.1, n)
    thr = float(np.quantile(mu, 0.7))
    w, keep = PD.bas_weights(mu, sigma, thr, "dbas")
    ref = norm.sf(thr, mu, sigma)
    ref = n * ref / ref.sum()
    assert np.allclose(w, ref[keep]) and (ref[np.setdiff1d(np.arange(n), keep)] <= 1e-6).all()
    # sigma -> 0: DbAS weights are the indicator 1[f(x) >= quantile], renormalised
    w0, keep0 = PD.bas_weights(mu, np.full(n, 1e-12), thr, "dbas")
    ind = (mu >= thr).astype(float)
    assert set(keep0) == set(np.flatnonzero(ind)) and np.allclose(w0, n / ind.sum())
    # CbAS: exceedance times p_train / p_design
    lt, ld = rng.normal(-10, 1, n), rng.normal(-10, 1, n)
    wc, keepc = PD.bas_weights(mu, sigma, thr, "cbas", lt, ld)
    refc = norm.sf(thr, mu, sigma) * np.exp(lt - ld)
    refc = n * refc / refc.sum()
    assert np.allclose(wc, refc[keepc]) and not np.allclose(wc, ref[keepc])


def test_cbas_dbas_iterations_follow_the_official_loop():
    rng, _, X, y, beta = _toy(n=400, seed=2)
    lin = lambda X1h: (X1h.reshape(len(X1h), -1, 4) * beta[None]).sum((1, 2))
    pms = lambda X1h: (lin(X1h), np.full(len(X1h), 0.05))
    train_vae = PD.fit_train_vae(X, seed=0, n_init_epoch=3)
    for kind in ("cbas", "dbas"):
        hist = []
        r = np.random.default_rng(3)
        D = PD.bas(pms, train_vae, 200, 0.8, kind, r, n_iter=4, n_sample=300, n_epoch=3, history=hist)
        thr = -np.inf
        for h in hist:  # threshold = running max of the prediction quantile; weights = the closed form
            thr = max(thr, float(np.quantile(h["mu"], 0.8)))
            assert h["threshold"] == thr
            w, keep = PD.bas_weights(h["mu"], h["sigma"], thr, kind, h["logp_train"], h["logp_design"])
            assert np.array_equal(keep, h["keep"]) and np.allclose(w, h["weights"])
        if kind == "cbas":  # the design VAE starts as the training VAE: ratio 1 at iteration 0
            assert np.allclose(hist[0]["logp_train"], hist[0]["logp_design"])
            assert not np.allclose(hist[-1]["logp_train"], hist[-1]["logp_design"])
        # the search moves the design distribution towards higher predictions
        assert lin(L.onehot(D)).mean() > hist[0]["mu"].mean() + 0.05


def test_vae_elbo_improves_and_weights_steer_the_fit():
    rng = np.random.default_rng(4)
    Ls = 12
    a, b = rng.integers(0, 4, Ls), rng.integers(0, 4, Ls)
    modes = rng.random(600) < 0.5
    X = np.where(modes[:, None], a[None], b[None])
    X = np.where(rng.random(X.shape) < 0.05, rng.integers(0, 4, X.shape), X)
    vae = PD.VAE(Ls, 4, latent_dim=2, n_hidden=16, seed=0)
    before = vae.neg_elbo(X)
    hist = vae.fit(X, n_epoch=6, seed=0)
    after = vae.neg_elbo(X)
    assert after < before - 3.0
    assert hist[-1]["train"] < hist[0]["train"] and min(h["val"] for h in hist[1:]) < hist[0]["val"]
    assert after < vae.neg_elbo(rng.integers(0, 4, (300, Ls))) - 3.0  # learned the data, not uniform
    # weighted fit: all weight on mode a -> samples concentrate near a
    vw = PD.VAE(Ls, 4, latent_dim=2, n_hidden=16, seed=0)
    vw.fit(X, weights=modes.astype(float) + 1e-9, n_epoch=6, seed=0)
    S = vw.generate(300, rng)[0]
    assert ((S == a[None]).mean(1) > (S == b[None]).mean(1)).mean() > 0.9


def test_pex_frontier_candidates_and_proximal_selection():
    rng, sidx, X, y, beta = _toy(n=300, seed=5)
    nb = PD.pex_frontier_neighbours(X, y, sidx, size=5)
    dist = PD.hamming_to(X, sidx)
    for i in nb:  # each neighbour beats every strictly closer training label, and is top-5 at its distance
        closer = y[dist < dist[i]]
        assert closer.size == 0 or y[i] > closer.max()
        assert (y[(dist == dist[i])] > y[i]).sum() < 5
    lin = lambda X1h: (X1h.reshape(len(X1h), -1, 4) * beta[None]).sum((1, 2))
    info = {}
    D = PD.pex(lin, X, y, sidx, 40, 0.1, np.random.default_rng(6), info=info)
    train = {r.tobytes() for r in X.astype(np.int8)}
    C = info["candidates"]
    assert len(C) == 80 and len({r.tobytes() for r in C.astype(np.int8)}) == 80
    assert not any(r.tobytes() in train for r in C.astype(np.int8))
    assert set(info["parents"]) <= set(nb)  # candidates only mutate frontier neighbours
    assert len(D) == 40 and np.array_equal(D, C[info["order"]])
    # first round = the proximal frontier: Pareto-optimal in (distance to seed, prediction), concave,
    # increasing, starting at the closest distance and ending at the best prediction
    pd_, pp = info["dist"], info["pred"]
    first = info["rounds"][0]
    for i in first:
        assert not ((pd_ <= pd_[i]) & (pp > pp[i])).any()
    assert pd_[first[0]] == pd_.min() and pp[first[-1]] == pp.max()
    pts = [(pd_[i], pp[i]) for i in first]
    assert all(PD._cross(pts[j], pts[j + 1], pts[j + 2]) <= 1e-12 for j in range(len(pts) - 2))
    assert all(pts[j + 1][1] >= pts[j][1] for j in range(len(pts) - 1))


def test_cnn_saved_weights_reproduce_the_official_architecture():
    import torch

    rng, _, X, y, _ = _toy(n=120, Ls=16, seed=7)
    m = M.CNNEnsemble.fit(L.onehot(X), y, seq_len=16, seed=0, n_models=2, n_filters=3, n_hidden=5, n_epoch=1)
    m2 = M.CNNEnsemble.from_state(m.state())
    tm = M.CNNEnsemble._torch_members(16, 4, 3, 5, 5, 2)
    for mem, net in zip(m2.members, tm):
        mods = [x for x in net if isinstance(x, (torch.nn.Conv1d, torch.nn.Linear))]
        for j, mod in enumerate(mods):
            p = "c" if isinstance(mod, torch.nn.Conv1d) else "l"
            mod.weight.data = torch.tensor(mem[f"{p}{j}_W"], dtype=torch.float64)
            mod.bias.data = torch.tensor(mem[f"{p}{j}_b"], dtype=torch.float64)
    tm = tm.double()
    Xt = torch.tensor(L.onehot(X).reshape(-1, 16, 4)).double().transpose(1, 2)
    with torch.no_grad():
        ref = torch.cat([net(Xt) for net in tm], 1).numpy()
    assert np.allclose(m2.member_predict(L.onehot(X)), ref, atol=1e-5)  # float32 forward
    mu, s = m2.predict_mu_sigma(L.onehot(X))
    assert np.allclose(mu, ref.mean(1), atol=1e-5) and np.allclose(s, ref.std(1), atol=1e-5)
