"""dbeta end to end at smoke scale through the real `snakemake` CLI (table, claims, figures; the data
contract: probing never sees pretraining records, prompts never in reports). The full-scale loaders are
tested in test_dbeta_downstream.py."""
from __future__ import annotations

import json

import numpy as np
import pytest


# this study's methods in the session's shared smoke run (conftest.study_smoke): fewer jobs, every stage runs
SMOKE_METHODS = ["random", "dbeta", "supervised"]


def test_snakemake_smoke_end_to_end(study_smoke):
    root = study_smoke("dbeta")  # the session's one snakemake run, with SMOKE_METHODS for this study
    tables = root / "results" / "smoke" / "tables"
    md = (tables / "dbeta.md").read_text()
    assert "paper: D-BETA" in md and "80.52" in md and "## Claims" in md
    claims = {c["id"]: c for c in json.loads((tables / "dbeta.claims.json").read_text())["claims"]}
    assert claims["lp1_dbeta_beats_clip"]["verdict"] == "n.a."      # clip not run: n.a., not a crash
    assert claims["zs_needs_contrastive"]["verdict"] in ("holds", "fails", "n.a. (floor)")
    figs = json.loads((root / "results" / "smoke" / "figures" / "dbeta" / "figures.json").read_text())
    names = {f["name"]: f for f in figs["figures"]}
    assert {"linear_probe", "zero_shot", "pretrain_loss"} <= set(names)
    assert all(f["caption"] for f in names.values())
    # the data contract, on the files the pipeline wrote
    data = root / "data" / "processed" / "smoke" / "dbeta"
    pre = np.load(data / "pretrain.npz")
    reports = json.loads((data / "pretrain_reports.json").read_text())
    prompts = json.loads((data / "labels.json").read_text())["prompts"]
    assert not any(p in r for p in prompts for r in reports)
    flat = {x.tobytes() for x in pre["x"]}
    for split in ("down_train", "down_test", "shift_test"):
        z = np.load(data / f"{split}.npz")
        assert not set(z["ids"]) & set(pre["ids"])
        assert not any(x.tobytes() in flat for x in z["x"])
    rec = json.loads((root / "results" / "smoke" / "dbeta" / "supervised" / "seed0" / "metrics.json").read_text())
    assert {r["setting"] for r in rec["metrics"] if r["metric"] == "auc"} == {"lp1"}   # supervised: 1% labels only
