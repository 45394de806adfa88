"""The full-scale GB1 task (gb1_known, the paper's Fig. 3) end to end at tiny size: a generated 20^4
stand-in of gb1-data.csv served over real HTTP and fetched through the same code path as the
official file (git blob id checked), then preprocess -> train -> evaluate -> table -> claims."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from icml25 import cli
from icml25.core.errors import UserError
from icml25.studies.design_select import data_gb1 as G


def _stand_in_csv(path):
    """All 20^4 variants with a smooth (additive + one pairwise term) log fitness around [-2, 2]."""
    import pandas as pd

    rng = np.random.default_rng(0)
    beta = rng.normal(0.0, 0.45, (4, 20))
    pair = rng.normal(0.0, 0.15, (20, 20))
    idx = np.indices((20,) * 4).reshape(4, -1).T  # same big-endian order as GB1Oracle
    y = beta[np.arange(4), idx].sum(1) + pair[idx[:, 0], idx[:, 3]]
    names = np.array(list(G.AA_NOSTOP.upper()))[idx]
    seqs = np.char.add(np.char.add(names[:, 0], names[:, 1]), np.char.add(names[:, 2], names[:, 3]))
    perm = rng.permutation(len(y))  # row order must not matter
    pd.DataFrame({"Variants": seqs[perm], "log_fitness": y[perm], "estimated_variance": 0.05 + 0.1 * rng.random(len(y))}
                 ).to_csv(path, index=False)
    return dict(zip(seqs.tolist(), y))


TEMPS = [0.2, 0.45, 0.7]  # names of released files: 5k-t0.2000.npz ...


def _stand_in_official(d):
    """A state dict with the official EnrichmentFeedForward's keys and shapes, and theta_lxa files."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.ModuleList([nn.Sequential(nn.Linear(84, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 1))
                         for _ in range(3)])
    torch.save({f"models.{k}": v for k, v in net.state_dict().items()}, d / G.OFFICIAL_MODEL)
    rng = np.random.default_rng(2)
    for T in TEMPS:
        np.savez(d / G.official_menu_file(T), theta_lxa=rng.normal(size=(12, 4)) / T)
    return net


@pytest.fixture(scope="module")
def served(tmp_path_factory, file_server):
    import hashlib

    www = tmp_path_factory.mktemp("www")
    (www / "gb1-models").mkdir()
    truth = _stand_in_csv(www / "gb1-models" / G.FILE)
    net = _stand_in_official(www / "gb1-models")
    sha = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in (www / "gb1-models").iterdir() if f.name != G.FILE}
    base = f"{file_server(www)}/gb1-models"
    return {"url": f"{base}/{G.FILE}", "blob": G.git_blob_sha1(www / "gb1-models" / G.FILE), "truth": truth,
           "base": base, "sha": sha, "net": net, "www": www / "gb1-models"}


def _tiny_full(workflow_copy, url, blob, base):
    path = workflow_copy / "config" / "studies" / "design_select.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["methods"] = ["pp", "prediction_only", "calibrated", "labelled_only"]
    full = raw["scales"]["full"]
    assert full["data"]["gb1"]["temperature_grid"] == [0.2, 0.7, 101] and full["data"]["gb1"]["n_design"] == 1000000
    assert {"gb1_known", "gb1_official"} <= set(full["tasks"])
    g = full["data"]["gb1"]
    g.update(url=url, git_blob_sha1=blob, official_base_url=base, n_train=800, temperature_grid=[0.2, 0.7, 3], n_design=400,
             n_labelled=150, n_trials=12, n_trial_sets=1, reinforce={"iters": 80, "samples": 100, "lr": 0.1},
             mlp={"n_models": 2, "n_hidden": 10, "n_epoch": 8, "batch_size": 64, "lr": 0.01})
    full.update(seeds=[0], tasks=["gb1_known", "gb1_official"], cf_designs=40, cf_grid=21)
    path.write_text(yaml.safe_dump(raw))
    return raw


def test_gb1_task_end_to_end_on_a_served_stand_in(served, workflow_copy, monkeypatch):
    url, blob, truth = served["url"], served["blob"], served["truth"]
    monkeypatch.setattr(G, "OFFICIAL_SHA256", served["sha"])  # the stand-ins' checksums, as SAND's test does
    raw = _tiny_full(workflow_copy, url, blob, served["base"])
    base = ["--root", str(workflow_copy), "--scale", "full", "--study", "design_select", "--threads", "1"]
    assert cli.main(["download", *base]) == 0
    assert cli.main(["preprocess", *base]) == 0
    proc = workflow_copy / "data" / "processed" / "full" / "design_select" / "gb1"
    known = dict(np.load(proc / "known.npz"))
    meta = json.loads((proc / "meta.json").read_text())
    # the menu: 3 temperatures x 1 predictor; the paper's tau grid np.arange(0, 1.51, 0.05)
    assert known["Q"].shape == (3, 4, 20) and len(meta["taus"]["mean"]) == 31
    # true theta is the exact design-weighted mean of the oracle table (brute force over 20^4 here)
    tab = dict(np.load(proc / "gb1.npz"))
    q = known["Q"][2]
    p_all = q[0][tab["idx"][:, 0]] * q[1][tab["idx"][:, 1]] * q[2][tab["idx"][:, 2]] * q[3][tab["idx"][:, 3]]
    assert np.isclose(p_all.sum(), 1.0) and np.isclose(known["theta_mean"][2], (p_all * tab["y"]).sum(), atol=1e-10)
    # the oracle is the served table
    oracle = G.GB1Oracle(tab["idx"], tab["y"])
    wt = np.array([[G.AA_NOSTOP.index(c) for c in G.WT]])
    assert np.isclose(oracle(wt)[0], truth[G.WT.upper()])
    # greedier (lower temperature) designs have higher true mean label on this smooth landscape
    assert known["theta_mean"][0] > known["theta_mean"][-1]
    for m in raw["methods"]:
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
    run = workflow_copy / "results" / "full" / "design_select" / "pp" / "seed0"
    sel = dict(np.load(run / "selections.npz"))
    assert set(sel) == {"gb1_known__mean", "gb1_official__mean"} and sel["gb1_known__mean"].shape == (12, 3, 31)
    rec = json.loads((run / "metrics.json").read_text())["metrics"]
    assert max(r["value"] for r in rec if r["metric"] == "ppi_check_maxdiff") < 1e-10
    assert {r["setting"] for r in rec if r["metric"] == "error_rate"} >= {"gb1_known/mean/t00", "gb1_known/mean/t30"}
    assert cli.main(["table", *base]) == 0 and cli.main(["figures", *base]) == 0
    figs = workflow_copy / "results" / "full" / "figures" / "design_select"
    assert {"design_select_gb1_known_mean.png", "design_select_gb1_official_mean.png"} <= {f.name for f in figs.iterdir()}
    tables = workflow_copy / "results" / "full" / "tables"
    assert "GB1, known ratios" in (tables / "design_select.md").read_text()
    claims = {c["id"]: c for c in json.loads((tables / "design_select.claims.json").read_text())["claims"]}
    assert claims["gb1_control"]["verdict"] in ("holds", "fails") and "gb1_official: g=mean: PP max error" in claims["gb1_control"]["ours"]
    # gb1_official runs the released files: menu = stop-rejected softmax(theta_lxa), predictor = the released net
    off = workflow_copy / "data" / "processed" / "full" / "design_select" / "gb1_official"
    Qoff = np.load(off / "known.npz")["Q"]
    for k, T in enumerate(TEMPS):
        th = np.load(served["www"] / G.official_menu_file(T))["theta_lxa"]
        assert np.allclose(Qoff[k], G.nostop_product(np.exp(th) / np.exp(th).sum(1, keepdims=True)))
    import torch

    X = np.random.default_rng(3).integers(0, 20, (50, 4))
    with torch.no_grad():
        ref = torch.cat([m(torch.tensor(G.onehot21(X))) for m in served["net"]], 1).numpy()
    assert np.allclose(G.load_task(off.parent, "gb1_official")["models"]["mlp"].member_predict(G.onehot21(X)), ref, atol=1e-5)
    assert claims["known_control"]["verdict"] == "n.a."  # RNA tasks not run in this config


def test_gb1_download_rejects_a_wrong_git_blob_id(served, tmp_path):
    url, blob = served["url"], served["blob"]
    G.download({"url": url, "sha256": None, "git_blob_sha1": blob}, tmp_path / "ok")
    assert (tmp_path / "ok" / G.FILE).exists()
    with pytest.raises(UserError, match="git blob id"):
        G.download({"url": url, "sha256": None, "git_blob_sha1": "0" * 40}, tmp_path / "bad")
    assert not (tmp_path / "bad" / G.FILE).exists()


def test_git_blob_id_matches_git(tmp_path):
    """Our blob id is git's object id (value of `git hash-object` for b'hello\\n')."""
    (tmp_path / "f").write_bytes(b"hello\n")
    assert G.git_blob_sha1(tmp_path / "f") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_stop_rejected_nnk_is_the_site_wise_product():
    """Nucleotide sampling + stop rejection (the official sampler) == our amino-acid product, and the
    product's normaliser equals the official brute-force sum over all stop-free 20^4 sequences."""
    P = G.nostop_product(G.PNUC_NNK)
    assert np.allclose(P[0] * 31, [3, 3, 3] + [2] * 5 + [1] * 12)  # NNK codon counts, 31 stop-free codons
    rng = np.random.default_rng(1)
    from icml25.studies.design_select import data_landscape as L

    pnuc = L.softmax_rows(rng.normal(size=(12, 4)))
    X = G.sample_nuc_reject(pnuc, 100000, rng)
    Q = G.nostop_product(pnuc)
    emp = np.stack([np.bincount(X[:, l], minlength=20) / len(X) for l in range(4)])
    assert np.abs(emp - Q).max() < 0.01
    paa = G.aa_probs(pnuc)
    assert np.allclose(paa.sum(1), 1.0)
    idx = np.indices((20,) * 4).reshape(4, -1).T
    brute = np.prod(paa[:, G.NOSTOP2AA][np.arange(4), idx], axis=1).sum()  # official normalising constant
    assert np.isclose(brute, np.prod(1 - paa[:, G.STOP]))
    logp = np.log(paa[:, G.NOSTOP2AA][np.arange(4), idx]).sum(1) - np.log(brute)
    assert np.allclose(logp, L.log_prob(idx, Q))


def test_weighted_loss_follows_the_weights():
    """Official GB1 loss: MSE weighted by 1 / (2 var). Duplicated inputs with labels y and y + 2: the
    weighted fit follows the low-variance copy, the unweighted one sits in the middle."""
    from icml25.studies.design_select.data_models import MLPEnsemble

    rng = np.random.default_rng(0)
    X = np.tile(G.onehot21(rng.integers(0, 20, (150, 4))), (2, 1))
    y = np.tile(rng.normal(size=150), 2) + np.repeat([0.0, 2.0], 150)
    w = np.repeat([10.0, 0.01], 150).astype(np.float32)
    kw = dict(seed=0, n_models=1, n_hidden=16, n_epoch=25, batch_size=100, lr=0.02)
    fw = MLPEnsemble.fit(X, y.astype(np.float32), weights=w, **kw).predict(X[:150])
    fu = MLPEnsemble.fit(X, y.astype(np.float32), **kw).predict(X[:150])
    assert abs(np.mean(fw - y[:150])) < 0.3 and abs(np.mean(fu - y[:150]) - 1.0) < 0.3
