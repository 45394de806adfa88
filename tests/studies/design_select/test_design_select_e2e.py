"""Smoke-scale end-to-end run of design_select through the CLI, plus loaders of the full scale."""
from __future__ import annotations

import json

import numpy as np
import pytest

from icml25 import cli
from icml25.core.errors import UserError


def test_smoke_end_to_end_is_deterministic(tmp_path):
    from conftest import copy_workflow

    root = copy_workflow(tmp_path / "wf")
    base = ["--root", str(root), "--scale", "smoke", "--study", "design_select", "--threads", "1"]
    assert cli.main(["download", *base]) == 0 and cli.main(["preprocess", *base]) == 0
    for m in ("pp", "prediction_only"):
        assert cli.main(["train", *base, "--method", m, "--seed", "0"]) == 0
        assert cli.main(["evaluate", *base, "--method", m, "--seed", "0"]) == 0
    run = root / "results/smoke/design_select/pp/seed0"
    first = dict(np.load(run / "selections.npz"))
    rec = json.loads((run / "metrics.json").read_text())
    names = {r["metric"] for r in rec["metrics"]}
    assert {"error_rate", "selection_rate", "max_error", "ppi_check_maxdiff"} <= names
    assert max(r["value"] for r in rec["metrics"] if r["metric"] == "ppi_check_maxdiff") < 1e-10
    assert cli.main(["train", *base, "--method", "pp", "--seed", "0"]) == 0
    again = dict(np.load(run / "selections.npz"))
    assert first.keys() == again.keys() and all((first[k] == again[k]).all() for k in first)
    # selections have the (trials, configurations, taus) shape of the data stage
    meta = json.loads((root / "data/processed/smoke/design_select/meta.json").read_text())
    assert first["known__mean"].shape == (8, len(meta["known_names"]), 4)


def test_gb1_loader_on_a_tiny_stand_in(tmp_path):
    from icml25.studies.design_select import data_gb1 as G

    rng = np.random.default_rng(0)
    seqs = ["".join(rng.choice(list(G.AA_NOSTOP), 4)) for _ in range(30)] + [G.WT]
    y = rng.normal(size=len(seqs))
    (tmp_path / "raw").mkdir()
    with open(tmp_path / "raw" / G.FILE, "w") as fh:
        fh.write("Variants,log_fitness,estimated_variance\n")
        for s, v in zip(seqs, y):
            fh.write(f"{s.upper()},{v},0.1\n")
    with pytest.raises(UserError, match="160000"):
        G.preprocess({}, tmp_path / "raw", tmp_path / "out")
    G.preprocess({"require_complete": False}, tmp_path / "raw", tmp_path / "out")
    t = dict(np.load(tmp_path / "out" / "gb1.npz"))
    oracle = G.GB1Oracle(t["idx"], t["y"])
    assert np.allclose(oracle(t["idx"]), y)
    wt = np.array([[G.AA_NOSTOP.index(c) for c in G.WT]])
    assert np.isclose(oracle(wt)[0], y[-1])


def test_validate_rejects_seed_without_trial_set():
    from icml25.core import config
    from icml25.studies.design_select.study import validate
    from conftest import REPO

    cfg = config.effective(config.load_study(REPO, "design_select"), "mini")
    cfg["seeds"] = [0, cfg["data"]["n_trial_sets"]]
    with pytest.raises(UserError, match="n_trial_sets"):
        validate(cfg)
