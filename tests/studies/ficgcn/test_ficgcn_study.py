"""ficgcn study level: claim checks on hand-built tables, config validation, the full-scale loaders on tiny
local stand-ins of the real files (served over HTTP), and the smoke DAG through the real snakemake CLI."""
from __future__ import annotations

import json
import pickle
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from icml25.core.errors import UserError
from icml25.studies.ficgcn import study as S

CFG = {"graphs": {"cora": {"nodes": 1}, "corafull": {"nodes": 1}, "seal": {"nodes": 1}}, "seal": {"graph": "seal"},
       "claims": {"small": "cora", "medium": None, "large": "corafull"}}


def _agg(vals):
    """vals: {(method, setting, metric): [per-seed values]} -> the aggregated frame the claims read."""
    return pd.DataFrame([{"method": m, "setting": s, "metric": k, "mean": float(np.mean(v)), "std": 0.0, "n": len(v),
                          "values": list(v), "seeds": list(range(len(v)))} for (m, s, k), v in vals.items()])


def _lat(f_small, f_large, base_small, base_large):
    vals = {}
    for name, f, b in (("cora", f_small, base_small), ("corafull", f_large, base_large)):
        vals[("ficgcn", name, "lat_units")] = f
        for m in S.BASELINES_ALL:
            vals[(m, name, "lat_units")] = b
    return vals


def test_latency_claims_read_ratios_per_seed():
    t = _agg(_lat([10, 11, 9], [10, 10, 10], [30, 33, 28], [50, 52, 49]))
    r = S.claim_2x(t, CFG)
    assert r.verdict == "holds" and r.n_seeds == 3 and abs(r.margin - (3 - 2)) < 0.1
    assert S.claim_grows(t, CFG).verdict == "holds"  # 3x -> 5x
    t = _agg(_lat([10, 11, 9], [10, 10, 10], [15, 16, 14], [12, 13, 12]))
    assert S.claim_2x(t, CFG).verdict == "fails" and S.claim_grows(t, CFG).verdict == "fails"


def test_noo_and_accuracy_claims():
    vals = {}
    for name in ("cora", "corafull"):
        vals[("ficgcn", name, "spintra_rot_agg2")] = [80, 82, 79]
        vals[("spintra_natural", name, "rot_agg2")] = [100, 100, 101]
        vals[("spintra_rcm", name, "rot_agg2")] = [95, 99, 97]
    r = S.claim_noo(_agg(vals), CFG)
    assert r.verdict == "holds" and 0.1 < r.margin < 0.25
    vals[("spintra_rcm", "corafull", "rot_agg2")] = [70, 71, 72]
    assert S.claim_noo(_agg(vals), CFG).verdict == "fails"
    acc = {("ficgcn", "seal", "seal_enc_acc"): [0.80, 0.79, 0.81], ("ficgcn", "seal", "seal_plain_acc"): [0.80, 0.79, 0.81],
           ("ficgcn", "seal", "seal_max_err"): [1e-4] * 3}
    assert S.claim_accuracy(_agg(acc), CFG).verdict == "holds"
    acc[("ficgcn", "seal", "seal_enc_acc")] = [0.78, 0.77, 0.79]
    assert S.claim_accuracy(_agg(acc), CFG).verdict == "fails"


def test_missing_rows_make_claims_not_applicable():
    from icml25.tables import check_claims

    out = check_claims(S.STUDY, _agg({("ficgcn", "cora", "rot"): [1.0]}), CFG)
    assert {c["verdict"] for c in out} == {"n.a."}


def test_validate_rejects_bad_config():
    from conftest import REPO

    from icml25.core import config

    cfg = config.effective(config.load_study(REPO, "ficgcn"), "mini")
    S.validate(cfg)
    with pytest.raises(UserError, match="power of two"):
        S.validate({**cfg, "slots": 1000})
    with pytest.raises(UserError, match="seal.graph"):
        S.validate({**cfg, "seal": {**cfg["seal"], "graph": "pubmed"}})
    full = config.effective(config.load_study(REPO, "ficgcn"), "full")
    S.validate(full)
    assert full["source"] == "real" and {g["dataset"] for g in S.graphs(full).values()} == {"cora", "citeseer", "corafull"}


def _planetoid_files(d, name, n=12, f=6, c=3, seed=0):
    """Kipf's Planetoid format: x/tx/allx scipy csr, y/ty/ally one-hot, graph dict of lists, test.index."""
    rng = np.random.default_rng(seed)
    n_test = 3
    test_idx = np.arange(n - n_test, n)[::-1]  # stored shuffled, as the real files
    X = sp.csr_matrix((rng.random((n, f)) < 0.4).astype(np.float32))
    Y = np.eye(c)[rng.integers(0, c, n)]
    objs = {"x": X[:4], "y": Y[:4], "allx": X[: n - n_test], "ally": Y[: n - n_test], "tx": X[test_idx],
            "ty": Y[test_idx]}  # row i of tx is node test_idx[i] (file order)
    graph = defaultdict(list)
    for u in range(n):
        graph[u].append((u + 1) % n)
        graph[(u + 1) % n].append(u)
    objs["graph"] = graph
    for k, v in objs.items():
        with open(d / f"ind.{name}.{k}", "wb") as fh:
            pickle.dump(v, fh)
    (d / f"ind.{name}.test.index").write_text("\n".join(str(i) for i in test_idx))
    return X, Y


def test_full_scale_loaders_on_local_stand_ins(tmp_path, file_server):
    src = tmp_path / "mirror"
    src.mkdir()
    X, Y = _planetoid_files(src, "cora")
    _planetoid_files(src, "citeseer", seed=1)
    rng = np.random.default_rng(0)
    Af = sp.random(40, 40, density=0.1, random_state=0, format="csr")
    Af = ((Af + Af.T) > 0).astype(np.float32)
    Xf = sp.csr_matrix((rng.random((40, 9)) < 0.3).astype(np.float32))
    np.savez(src / "cora.npz", adj_data=Af.data, adj_indices=Af.indices, adj_indptr=Af.indptr, adj_shape=Af.shape,
             attr_data=Xf.data, attr_indices=Xf.indices, attr_indptr=Xf.indptr, attr_shape=Xf.shape,
             labels=rng.integers(0, 4, 40))
    from conftest import REPO

    from icml25.core import config

    cfg = config.effective(config.load_study(REPO, "ficgcn"), "full")
    cfg.update(mirror=file_server(src), seeds=[0], features=4, split={"per_class": 2, "val": 5, "test": 10})
    raw, out = tmp_path / "raw", tmp_path / "proc"
    S.download(cfg, raw)
    assert (raw / "cora" / "ind.cora.graph").exists() and (raw / "corafull" / "cora.npz").exists()
    S.preprocess(cfg, raw, out)
    from icml25.studies.ficgcn.pipeline import load_graph

    g = load_graph(out, "cora", 0)
    assert g["A"].shape == (12, 12) and g["X"].shape == (12, 4)
    np.testing.assert_array_equal(g["labels"], Y.argmax(1))  # test rows put back in their index order
    assert np.allclose(g["A"].diagonal(), 1 / 3)  # ring graph + self loop, degree 3 normalisation
    gf = load_graph(out, "corafull", 0)
    assert gf["A"].shape == (40, 40) and len(gf["train"]) <= 8
    cfg["graphs"]["cora"]["sha256"] = {"ind.cora.x": "0" * 64}
    (raw / "cora" / "ind.cora.x").unlink()
    with pytest.raises(UserError, match="checksum"):
        S.download(cfg, raw)


def test_smoke_dag_through_snakemake(study_smoke):
    root = study_smoke("ficgcn")  # the session's one smoke run through the snakemake CLI
    res = root / "results" / "smoke"
    md = (res / "tables" / "ficgcn.md").read_text()
    assert S.PAPER.title in md and "## Claims" in md and "64.1 s" in md
    claims = json.loads((res / "tables" / "ficgcn.claims.json").read_text())["claims"]
    assert [c["id"] for c in claims] == [c.id for c in S.CLAIMS]
    rec = json.loads((res / "ficgcn" / "ficgcn" / "seed0" / "metrics.json").read_text())["metrics"]
    seal = {r["metric"]: r["value"] for r in rec if r["setting"] == "seal"}
    assert seal["seal_counts_match"] == 1.0 and seal["seal_vs_sim_err"] < 1e-3
    figs = json.loads((res / "figures" / "ficgcn" / "figures.json").read_text())["figures"]
    assert {f["name"] for f in figs} == {"cost_vs_size", "advantage_vs_size"} and all(f["caption"] for f in figs)
